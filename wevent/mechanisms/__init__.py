"""Stream mechanisms: budget allocators (central, local, population) and noise primitives."""
