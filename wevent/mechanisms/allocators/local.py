"""The local budget-division family: every user reports every slot through a frequency oracle,
and the budget per slot comes from the fixed-window kernel (`wevent.mechanisms.allocators.fixed`):
``lbu``, ``lsp``, ``lbd``, ``lba`` (002 Section 5) and ``plbu`` (001 Section 6.2). Only their data
path differs from their central namesakes, so the window theorem is the same.

The non-personalized ones (lbu, lsp, lbd, lba) serve every user with the largest window and the
smallest budget of the population (as the central BD/BA do).

`SPECS` declares the family (`wevent.mechanisms.allocators.registry` collects it). The population-
division family is `wevent.mechanisms.allocators.population`; this module also gives the names of
both local families (`LOCAL`, `POPULATION`, `ORACLE_CHOICE`) and the population setup
(`PopulationSetup`, `population_setup`) under their long-standing import path.
"""

from __future__ import annotations

from typing import Final

from wevent.mechanisms.allocators import population
from wevent.mechanisms.allocators.api import AllocatorSpec
from wevent.mechanisms.allocators.fixed import fixed_factory
from wevent.mechanisms.allocators.kernel import VARIANTS
from wevent.mechanisms.allocators.population import PopulationSetup, population_setup

__all__ = [
    "LOCAL",
    "LOCAL_BUDGET",
    "ONE_ORACLE",
    "ORACLE_CHOICE",
    "POPULATION",
    "SPECS",
    "PopulationSetup",
    "population_setup",
]


def _spec(name: str, scaling: str, summary: str) -> AllocatorSpec:
    return AllocatorSpec(name, "fixed", scaling, summary, fixed_factory(name), variants=VARIANTS)


# The family's specs, in the order the command line lists them.
SPECS: Final = (
    _spec("lbu", "global", "LDP budget uniform: eps/w every slot (002 Section 5.2.1)"),
    _spec("lsp", "global", "LDP sampling: all of eps every w slots (002 Section 5.2.2)"),
    _spec("lbd", "global", "LDP budget distribution (002 Algorithm 1)"),
    _spec("lba", "global", "LDP budget absorption (002 Algorithm 2)"),
    _spec("plbu", "per-class", "personalized LDP uniform: eps_i/w_i (001 Section 6.2)"),
)

# The members whose reports go through one frequency oracle at one budget (the non-personalized
# ones, "global" scaling), where ``--oracle grr|oue`` applies; plbu reports through the
# personalized frequency oracle (GRR per budget).
ONE_ORACLE: Final = tuple(s.name for s in SPECS if s.scaling == "global")

# The names of both local families, as `wevent.mechanisms.allocators.registry` collects them.
LOCAL_BUDGET: Final = tuple(s.name for s in SPECS)
POPULATION: Final = tuple(s.name for s in population.SPECS)
LOCAL: Final = LOCAL_BUDGET + POPULATION
ORACLE_CHOICE: Final = ONE_ORACLE + population.ONE_ORACLE
