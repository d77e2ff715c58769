"""Stream mechanisms (later issues)."""
