"""`wevent prove` for allocators: exit codes, JSON shape, and counterexamples `wevent trace`
replays to the same failure."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from wevent.cli import cli
from wevent.proofs.central import AllocatorProof


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_proved_exit_0_and_json_scope() -> None:
    code, out, _ = run("prove", "allocator", "pbd", "--w-max", "2", "--classes", "1", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["result"] == "proved" and data["mechanism"] == "pbd"
    assert data["scope"] == {
        "classes": "1..1",
        "w": "1..2",
        "horizon": 6,
        "budgets": "positive reals",
    }
    assert data["solver"].startswith("z3 ")


def test_proved_text_states_theorem_and_scope() -> None:
    code, out, _ = run("prove", "allocator", "ba", "--w-max", "2", "--classes", "1", "--unbounded")
    assert code == 0
    assert "; by k-induction" in out and "every horizon" in out and "horizon=unbounded" in out


def test_dynamic_unbounded_on_two_processes() -> None:
    """`--unbounded` for a dynamic kernel: the induction, its shapes shared by --jobs workers;
    the published rule is refuted (exit 1) through the bounded search it falls back to."""
    args = ["--unbounded", "--w-max", "2", "--classes", "1"]
    code, out, _ = run("prove", "allocator", "dpbd", *args, "--jobs", "2")
    assert code == 0, out
    assert "every horizon" in out and "; by induction" in out and "16 one-class shapes" in out
    code, out, _ = run("prove", "allocator", "dpbd", *args, "--variant", "published")
    assert code == 1 and "REFUTED by induction (refuted by the bounded search)" in out


def test_declaration_slots_choose_the_schedules() -> None:
    """`--declarations 1`: one declaration per class, so w_max = 3 has 9 shapes (not 81)."""
    args = ["--unbounded", "--w-max", "3", "--declarations", "1", "--json"]
    code, out, _ = run("prove", "allocator", "dpba", *args)
    assert code == 0, out
    data = json.loads(out)
    assert data["scope"]["declaration_slots"] == [1]
    assert "9 one-class shapes" in data["notes"][0]


def test_counterexample_exit_1_replays_with_trace(tmp_path: Path) -> None:
    req = tmp_path / "cex.csv"
    args = ["--variant", "published", "--arithmetic", "float", "--classes", "1", "--w-max", "3"]
    code, out, _ = run("prove", "allocator", "ba", *args, "--json", "--save-requirements", str(req))
    assert code == 1
    data = json.loads(out)
    assert data["result"] == "counterexample"
    # in doubles end to end: 0.1 parses to 0.1000000000000000055..., spent whole in one slot
    assert data["requirements"] == [{"user": "u1", "w": 1, "epsilon": "0.1"}]
    assert data["decisions"] == [1]
    violation = data["violation"]
    assert violation["slot"] == 1 and violation["kind"] == "fixed"
    assert violation["window"] == [1, 1] and violation["bound"] == "1/10"
    decisions = ",".join(str(d) for d in data["decisions"])
    code, out, _ = run(
        "trace", "ba", "-r", str(req), "--decisions", decisions,
        "--variant", "published", "--arithmetic", "float", "--json",
    )  # fmt: skip
    assert code == 1
    trace = json.loads(out)
    assert trace["refusal"]["slot"] == violation["slot"]
    assert trace["refusal"]["kind"] == "fixed"


def test_counterexample_text_prints_csv_and_command() -> None:
    code, out, _ = run("prove", "allocator", "dpbd", "--variant", "published")
    assert code == 1
    assert "REFUTED" in out and "user,slot,w_back,eps_back,w_fwd,eps_fwd" in out
    assert "wevent trace dpbd -r counterexample.csv --decisions" in out


def test_unknown_exit_3(monkeypatch: pytest.MonkeyPatch) -> None:
    def undecided(mechanism: str, **kw: Any) -> AllocatorProof:
        return AllocatorProof(
            mechanism, "sound", "exact", "bounded", "s", {}, "unknown", 1.0, 1, reason="timeout"
        )

    monkeypatch.setattr("wevent.proving.prove_allocator", undecided)
    code, out, _ = run("prove", "allocator", "pba")
    assert code == 3 and "UNKNOWN" in out and "timeout" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ba", "--w-max", "0"], "--w-max"),
        (["nope"], "no built-in allocator 'nope'"),
        (["pbaa"], "did you mean 'pba'"),
        (["lpd"], "use 'wevent prove population lpd'"),
        (["ba", "--unbounded", "--arithmetic", "float"], "exact arithmetic"),
        (["dpbd", "--unbounded", "--arithmetic", "float"], "exact arithmetic"),
        (["dpbd", "--declarations", "2,1"], "must increase and start at 1"),
        (["dpbd", "--declarations", "1,x"], "separated by commas"),
        (["dpbd", "--declarations", "1,2,3,4"], "at most 3"),
        (["bd", "--declarations", "1"], "dynamic kernels only"),
    ],
)
def test_bad_input_exit_2_one_line(args: list[str], message: str) -> None:
    code, _, err = run("prove", "allocator", *args)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert message in err and "Traceback" not in err


def test_help_teaches() -> None:
    code, out, _ = run("prove", "--help")
    assert code == 0
    for word in ("primitive", "allocator", "population", "exsub", "PROVED", "Exit 0"):
        assert word in out
    code, out, _ = run("prove", "allocator", "--help")
    assert code == 0
    for word in ("--unbounded", "--w-max", "--classes", "--unroll", "replays"):
        assert word in out


def test_primitives_still_proved() -> None:
    code, out, _ = run("prove", "primitive", "grr", "--json")
    assert code == 0 and json.loads(out)[0]["result"] == "proved"


def test_exsub_and_population_first_lines_give_their_scope() -> None:
    # Found in review: "exsub (sound): PROVED (40 inputs, ...)" and "lpa (sound): PROVED (0.01
    # s)" named no scope on their first line, and the population scope was a Python dict repr.
    code, out, _ = run("prove", "exsub", "--domain", "4", "--sparsity", "1", "--m", "2")
    assert code == 0
    assert out.startswith("exsub (sound): PROVED for d' = 4, s = 1, m = 2, every eps > 0 (8 inputs")
    args = ["prove", "population", "lpa", "--w-max", "2", "--classes", "1", "--unroll", "2"]
    code, out, _ = run(*args)
    assert code == 0 and "{'" not in out
    assert out.startswith(
        "lpa (sound): PROVED for 1 class, windows 1..2, users 2 w_max .. 3 w_max, 2 slots; "
        "user windows at budgets {1} or {1, 7/10, 1/3} or {1/1000, 1/3, 7/10} ("
    )  # the user-windows theorem holds for those budget assignments only: said on line one
    code, out, _ = run(*args, "--json")
    pool = next(th for th in json.loads(out)["theorems"] if th["theorem"] == "pool-never-short")
    assert pool["scope"]["horizon"] == 2


def test_allocator_first_line_gives_its_scope() -> None:
    code, out, _ = run("prove", "allocator", "pbd", "--w-max", "2", "--classes", "1")
    assert code == 0 and out.startswith(
        "pbd (sound, exact arithmetic): PROVED for 1..1 classes, windows 1..2, 6 slots, budgets "
        "positive reals; by bounded ("
    )
    code, out, _ = run("prove", "allocator", "ba", "--w-max", "2", "--classes", "1", "--unbounded")
    assert code == 0 and "PROVED for 1..1 classes, windows 1..2, every horizon" in out
