"""`import wevent` is the public API: a pinned surface, and the task a user has (spend through
the guard, keep a durable ledger, check and audit it) written with nothing but ``wevent.``."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import wevent

PUBLIC = {
    "GRR",
    "OUE",
    "Allocator",
    "AllocatorError",
    "AllocatorSpec",
    "AuditResult",
    "Budget",
    "BudgetError",
    "BudgetExceeded",
    "ChainedJsonlWriter",
    "Charge",
    "Declaration",
    "DiscreteLaplace",
    "DiscreteLaplaceMechanism",
    "Dynamic",
    "EngineError",
    "Evidence",
    "EvidenceKind",
    "EvidenceRejected",
    "ExSub",
    "Fixed",
    "FormatError",
    "InputError",
    "Guard",
    "Integrity",
    "Laplace",
    "LaplaceMechanism",
    "Ledger",
    "Population",
    "PopulationAllocatorError",
    "PopulationSpec",
    "PostProcessing",
    "ProverError",
    "Refused",
    "Requirement",
    "RequirementClass",
    "Sampled",
    "SegmentWriter",
    "SparsityExceeded",
    "Verdict",
    "Violation",
    "WeventError",
    "WholeStream",
    "__version__",
    "audit",
    "check",
    "read_ledger",
    "read_ledgers",
    "read_requirements",
    "register_evidence_kind",
    "resolve",
    "run_trace",
    "write_ledger",
    "write_requirements",
}

SCRIPT = """
import sys
from fractions import Fraction
import numpy as np
import wevent

ledger_path = sys.argv[1]
pop = wevent.Population({
    "alice": wevent.Fixed(3, wevent.Budget("0.3")),
    "bob": wevent.Fixed(2, wevent.Budget("1/2")),
})
guard = wevent.Guard(pop)
noise = wevent.LaplaceMechanism.for_budget(1, wevent.Budget("0.1"))
rng = np.random.default_rng(7)
for slot in (1, 2, 3):
    for user in ("alice", "bob"):
        noise.release(guard, slot, [1.0], rng, user=user, part="publication")
try:
    noise.release(guard, 3, [1.0], rng, user="alice")
except wevent.BudgetExceeded as refusal:
    print("refused:", refusal.slot)
with wevent.ChainedJsonlWriter(ledger_path) as out:
    for charge in guard.ledger:
        out.append_charge(charge)
    out.commit()
    head = out.head
assert wevent.check(guard.ledger, pop).ok
result = wevent.audit([__import__("pathlib").Path(ledger_path)], pop, expect_head=head)
print("audit ok:", result.ok, "charges:", len(guard.ledger), "head:", head)
"""


def test_the_public_surface_is_pinned() -> None:
    assert set(wevent.__all__) == PUBLIC
    assert set(wevent._LAZY) | {"__version__"} == PUBLIC  # every public name loads lazily
    for name in PUBLIC:
        assert getattr(wevent, name) is not None, name
    assert isinstance(wevent.__version__, str) and wevent.__version__


def test_importing_wevent_loads_no_optional_dependency() -> None:
    """`import wevent` loads nothing (the pytest plugin imports it in every session of a
    project that has wevent installed); using every public name loads no optional module."""
    optional = "('z3', 'duckdb', 'pyarrow', 'pyspark', 'matplotlib', 'hypothesis')"
    code = (
        "import sys, wevent, wevent.errors; "
        "print(sorted(m for m in ('numpy', 'wevent.verifier') if m in sys.modules)); "
        "[getattr(wevent, n) for n in wevent.__all__]; "
        f"print(sorted(m for m in {optional} if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["[]", "[]"]


def test_unknown_names_are_attribute_errors() -> None:
    import pytest

    with pytest.raises(AttributeError, match="no attribute 'Gaurd'"):
        _ = wevent.Gaurd  # type: ignore[attr-defined]
    assert "Guard" in dir(wevent)


def test_a_user_script_with_only_wevent_spends_keeps_a_durable_ledger_and_audits_it(
    tmp_path: Path,
) -> None:
    script = tmp_path / "task.py"
    script.write_text(textwrap.dedent(SCRIPT))
    assert len(SCRIPT.strip().splitlines()) <= 30
    ledger = tmp_path / "run.jsonl"
    done = subprocess.run(
        [sys.executable, str(script), str(ledger)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "refused: 3" in done.stdout
    assert "audit ok: True charges: 6" in done.stdout
    # the ledger is chained: lowering a recorded amount breaks the audit against the same head
    head = done.stdout.split("head: ")[1].split()[0]
    pop = wevent.Population(
        {
            "alice": wevent.Fixed(3, wevent.Budget("0.3")),
            "bob": wevent.Fixed(2, wevent.Budget("1/2")),
        }
    )
    assert wevent.audit([ledger], pop, expect_head=head).ok
    lines = ledger.read_text().splitlines()
    assert '"epsilon":"0.1"' in lines[0]
    lines[0] = lines[0].replace('"epsilon":"0.1"', '"epsilon":"0.01"')
    ledger.write_text("\n".join(lines) + "\n")
    assert not wevent.audit([ledger], pop, expect_head=head).ok


def test_every_error_wevent_raises_on_purpose_has_one_root() -> None:
    from wevent.mechanisms.allocators import api, registry
    from wevent.mechanisms.central import InvalidAllocation
    from wevent.mechanisms.exsub import SparsityExceeded
    from wevent.mechanisms.pool import PoolExhausted
    from wevent.verifier.sql import EngineError

    for error in (
        wevent.BudgetError,
        wevent.FormatError,
        wevent.AllocatorError,
        wevent.PopulationAllocatorError,
        wevent.SparsityExceeded,
    ):
        assert issubclass(error, wevent.InputError) and issubclass(error, ValueError), error
    # named for what they are: an allocator, a sparsity or an engine error is no budget error
    for not_budget in (wevent.AllocatorError, wevent.SparsityExceeded, wevent.EngineError):
        assert not issubclass(not_budget, wevent.BudgetError), not_budget
    assert issubclass(wevent.PopulationAllocatorError, wevent.AllocatorError)
    assert issubclass(wevent.FormatError, wevent.BudgetError)
    # an engine failure is neither bad input nor a refusal
    assert issubclass(wevent.EngineError, wevent.WeventError)
    assert not issubclass(wevent.EngineError, wevent.InputError | wevent.Refused)
    assert not issubclass(wevent.EngineError, ValueError)
    # one class each, whichever module a caller imports it from
    assert EngineError is wevent.EngineError and SparsityExceeded is wevent.SparsityExceeded
    assert api.AllocatorError is registry.AllocatorError is wevent.AllocatorError
    assert registry.PopulationAllocatorError is wevent.PopulationAllocatorError
    for refusal in (wevent.BudgetExceeded, wevent.EvidenceRejected):
        assert issubclass(refusal, wevent.Refused)
        assert not issubclass(refusal, wevent.InputError)
    for root_child in (wevent.InputError, wevent.Refused, wevent.ProverError, InvalidAllocation):
        assert issubclass(root_child, wevent.WeventError)
    assert issubclass(PoolExhausted, wevent.WeventError)
    pop = wevent.Population({"a": wevent.Fixed(1, wevent.Budget("0.1"))})
    guard = wevent.Guard(pop)
    guard.spend(1, wevent.Budget("0.1"), user="a")
    try:
        guard.spend(1, wevent.Budget("0.1"), user="a")
    except wevent.Refused as refusal:  # one except for every refusal
        assert isinstance(refusal, wevent.BudgetExceeded)
    else:
        raise AssertionError("the guard accepted a spend over the bound")


def test_refusals_cross_processes() -> None:
    """A refusal raised in a worker process (the dynamic proofs and reproduce use them) pickles
    to an equal refusal: same type, fields and message."""
    import pickle
    from fractions import Fraction

    from wevent.accounting.spending import EvidenceRejected
    from wevent.mechanisms.pool import PoolExhausted

    pop = wevent.Population({"a": wevent.Fixed(2, wevent.Budget("0.1"))})
    guard = wevent.Guard(pop)
    guard.spend(1, "0.1", user="a")
    with pytest.raises(wevent.BudgetExceeded) as caught:
        guard.spend(2, "0.1", user="a")
    refusals: list[Exception] = [
        caught.value,
        EvidenceRejected(subject="u", slot=1, amount=Fraction(1, 10), lower=Fraction(1, 5)),
        PoolExhausted(3, 10, 4, "publication"),
    ]
    for refusal in refusals:
        copy = pickle.loads(pickle.dumps(refusal))
        assert type(copy) is type(refusal) and str(copy) == str(refusal)
        assert vars(copy) == vars(refusal)
