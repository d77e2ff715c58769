"""Z3 proofs (later issue)."""
