"""The papers' experiments: metrics, requirement populations, sweeps and the registry behind
``wevent reproduce`` (see docs/reproduction.md)."""
