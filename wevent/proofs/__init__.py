"""Z3 proofs of the allocators' window theorems and the primitives' privacy claims."""
