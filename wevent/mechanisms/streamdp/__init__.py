"""Central w-event mechanisms of Schäler et al.'s streamdp-benchmark (VLDB 2023), each a budget kernel and a data path (docs/peers.md, docs/allocators.md)."""

# The allocator registry imports this package's modules; importing one of them first must
# initialize the allocators package (and its registry) before the module itself runs.
import wevent.mechanisms.allocators  # noqa: F401
