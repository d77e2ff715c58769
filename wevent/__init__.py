"""wevent application layer: CLI and demo."""
