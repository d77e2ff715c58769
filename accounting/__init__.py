"""wevent accounting vocabulary."""
