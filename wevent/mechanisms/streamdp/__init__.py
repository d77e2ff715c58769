"""Central w-event mechanisms of Schäler et al.'s streamdp-benchmark (VLDB 2023), each a budget kernel and a data path (docs/peers.md, docs/allocators.md)."""
