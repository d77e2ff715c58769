"""Help texts several commands share."""

from __future__ import annotations

__all__ = ["ALLOCATOR_HELP", "EXSUB_RUN_HELP", "TARGET_HELP"]

ALLOCATOR_HELP = """
\b
Central model (001 and Kellaris et al.):
  uniform  eps/w at every slot                    sample  all of eps every w slots
  bd       budget distribution                    ba      budget absorption
  pbd      personalized distribution (001 Alg 4)  pba     personalized absorption (001 Alg 5)
  dpbd     dynamic distribution (001 Alg 6)       dpba    dynamic absorption (001 Alg 7)
\b
Local model, budget division (every user reports every slot; 002 Section 5):
  lbu      eps/w at every slot                    lsp     all of eps every w slots
  lbd      LDP budget distribution (002 Alg 1)    lba     LDP budget absorption (002 Alg 2)
  plbu     eps_i/w_i at every slot, personalized oracle (001 Section 6.2)
\b
Local model, population division (sampled users report once per window; 002 Section 6, 000):
  lpu      n/w fresh users every slot             lpd/lpa  population distribution/absorption
  plpd     personalized distribution (000 Alg 5)  plpa     personalized absorption (000 Alg 6)
  plpd+    with OPS and PUE (000 Alg 3)           plpa+    with OPS and PUE (000 Alg 4)
  plbd-rp, plba-rp    PUE without OPS             plbd-ops, plba-ops  OPS without PUE
uniform, sample, bd, ba and the non-personalized local ones serve every user with the largest
window and the smallest budget.
"""

TARGET_HELP = """
\b
Your own allocator (the Allocator protocol of wevent.mechanisms.allocators.api):
  NAME               an entry point of the group wevent.allocators
  module:attribute   an Allocator, or a callable returning one (the current directory is
                     searched first, as with python -m)
Writing one and gating it in CI: docs/gate.md.
"""

EXSUB_RUN_HELP = """
\b
Whole-stream local model (004):
  exsub    every user picks one hierarchy level, is charged its whole-stream eps once (w = inf
           requirements) and reports its level's residues online through ExSub (Algorithm 4);
           --stream sparse --slots T --domain D --sparsity S, or a CSV (categorical values
           one-hot)
"""
