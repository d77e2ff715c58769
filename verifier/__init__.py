"""Runtime guard and batch checker."""
