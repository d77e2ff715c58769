"""Central w-event mechanisms of Schäler et al.'s streamdp-benchmark (VLDB 2023), each a budget kernel and a data path (docs/peers.md, docs/allocators.md)."""

# The allocator registry imports this package's modules, which import the allocators package:
# loading that package first lets a module of this package be the first one imported.
import wevent.mechanisms.allocators  # noqa: F401
