"""The gate's mutation suite: every broken allocator the default `wevent gate`
must refute with a counterexample `wevent trace` replays, and every sound non-built-in one it must
accept. `tests/test_gate_suite.py` runs it (the whole default gate under ``slow``);
`benchmarks/bench_gate_mutants.py` measures it.

``BROKEN`` maps each gate target to the scope that shows its bug: "any" for bugs the proof's
default scope (w <= 3, 2 classes, 9 slots) already reaches, else what it takes (a window of 5 or
more, a third class, a run past 4 w slots, a requirement change past slot 10, a large pool, ...).
"""

from __future__ import annotations

from tests.gate_mutants import MUTANTS, POPULATION_MUTANTS
from tests.gate_scope_kernels import SCOPE_KERNELS
from tests.gate_sound import SOUND, SOUND_POPULATION

__all__ = ["BROKEN", "SCOPE_ONLY", "SOUND_TARGETS"]

_SCOPES = {
    "share_short_at_five": "w >= 5",
    "third_class_doubled": "3 classes",
    "late_double_share": "past slot 12",
    "late_change_ignored": "a requirement change past slot 10",
    "history_of_eight": "w >= 10",
    "first_two_classes": "3 classes",
    "share_table_to_seven": "w >= 8",
    "short_window_from_four": "w >= 4",
    "accountant_resets_every_4w": "past 4 w slots",
    "clock_wraps_at_64": "past slot 64",
    "fifth_class_borrows_budget": "5 classes",
    "absorb_past_window_from_six": "w >= 6",
    "fourth_class_forgotten": "4 classes",
    "tiny_budget_floor": "a budget below 0.001 w",
}

BROKEN: dict[str, str] = {
    **{f"tests.gate_mutants:{name}": "any" for name in MUTANTS},
    **{f"tests.gate_mutants:{name}": "any" for name in POPULATION_MUTANTS},
    **{f"tests.gate_scope_kernels:{name}": _SCOPES[name] for name in SCOPE_KERNELS},
    "tests.gate_scope_kernels:recycle_short_from_five": "w >= 5 (population)",
    "tests.gate_scope_kernels:recycle_short_for_large_pools": "pools of 40 w users or more",
    "tests.test_prover_soundness:CLASS_ZERO": "any (class order (1, 3), not (3, 1))",
    "tests.test_prover_soundness:SHARE_COUNT": "any (two classes)",
    "tests.test_prover_soundness:GLOBAL_SHARE_COUNT": "any (two classes)",
    "tests.test_gate_verdicts:PLAIN_BROKEN": "any (plain Python: searched only)",
}

SCOPE_ONLY = [target for target, scope in BROKEN.items() if not scope.startswith("any")]

SOUND_TARGETS = [f"tests.gate_sound:{name}" for name in (*SOUND, *SOUND_POPULATION)]
