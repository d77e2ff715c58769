"""`wevent trace` and `wevent run` for the local allocators: shapes, exit codes, clean ledgers,
communication cost."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from wevent.accounting.formats import read_ledger, read_requirements
from wevent.cli import cli
from wevent.experiments.running import open_stream, run_mechanism
from wevent.mechanisms.allocators import LOCAL, POPULATION
from wevent.verifier.check import check


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


@pytest.fixture
def req(tmp_path: Path) -> str:
    rows = ["user,w,epsilon"]
    rows += [f"a{i},2,1" for i in range(5)]
    rows += [f"b{i},5,1" for i in range(5)]
    path = tmp_path / "req.csv"
    path.write_text("\n".join(rows) + "\n")
    return str(path)


def test_population_trace_json_shape(req: str) -> None:
    code, out = run("trace", "plpd+", "-r", req, "--decisions", "1,0,1", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["ok"] is True and doc["setup"]["recycle"] == 2
    assert doc["setup"]["splits"] == {"class-0": 1, "class-1": 3}
    first = doc["slots"][0]
    assert first["sampled"] == {"dissimilarity": 2, "publication": 2}
    assert len(first["budgets"]) == 4
    for budgets in first["budgets"].values():
        assert set(budgets) <= {"dissimilarity", "publication"}
        assert all(v in ("1", "1/3") for v in budgets.values())


def test_published_ops_trace_exits_1_with_the_window(req: str) -> None:
    code, out = run(
        "trace", "plpd+", "-r", req, "--decisions", "1,1,1,1,1", "--variant", "published"
    )
    assert code == 1
    assert "REFUSED by the guard" in out and "fixed window [1, 5]" in out


def test_population_trace_rejects_float_arithmetic(req: str) -> None:
    code, out = run("trace", "lpd", "-r", req, "--decisions", "1", "--arithmetic", "float")
    assert code == 2 and "only applies to the central" in out


@pytest.mark.parametrize("mechanism", LOCAL)
def test_every_local_allocator_runs_with_a_clean_ledger(mechanism: str, tmp_path: Path) -> None:
    req = tmp_path / "req.csv"
    req.write_text(
        "user,w,epsilon\n"
        + "".join(f"a{i},3,1\n" for i in range(40))
        + "".join(f"b{i},6,2\n" for i in range(60))
    )
    ledger = tmp_path / "run.jsonl"
    releases = tmp_path / "rel.csv"
    code, out = run(
        "run", mechanism, "-r", str(req), "--stream", "sin", "--slots", "20", "--domain", "3",
        "--ledger", str(ledger), "--releases", str(releases),
    )  # fmt: skip
    assert code == 0, out
    assert "CFPU" in out
    verdict = check(read_ledger(ledger), read_requirements([req]))
    assert verdict.ok and not verdict.violations
    assert len(releases.read_text().splitlines()) == 1 + 20 * 3


def test_cfpu_of_the_baselines(tmp_path: Path) -> None:
    """002 Sections 5.4.3 and 6.3.3: LBU reports once per user per slot, LSP and LPU 1/w."""
    req = tmp_path / "req.csv"
    req.write_text("user,w,epsilon\n" + "".join(f"u{i},4,1\n" for i in range(40)))
    pop = read_requirements([req])
    cfpu = {}
    for m in ("lbu", "lsp", "lpu"):
        s = run_mechanism(m, pop, open_stream("lns", pop, 40, 0, None), slots=40, seed=0)
        cfpu[m] = s.reports / (40 * 40)
    assert cfpu == {"lbu": 1.0, "lsp": 0.25, "lpu": 0.25}


@pytest.mark.parametrize("oracle", ["grr", "oue"])
def test_oracle_choice(req: str, oracle: str) -> None:
    code, out = run("run", "lba", "-r", req, "--stream", "lns", "--slots", "5", "--oracle", oracle)
    assert code == 0, out


def test_oracle_refused_for_personalized_and_central(req: str) -> None:
    code, out = run("run", "plpa", "-r", req, "--stream", "lns", "--slots", "5", "--oracle", "oue")
    assert code == 2 and "personalized frequency oracle" in out
    code, out = run("run", "pba", "-r", req, "--stream", "lns", "--slots", "5", "--oracle", "oue")
    assert code == 2 and "central" in out


def test_population_allocators_are_listed_in_help() -> None:
    code, out = run("run", "--help")
    assert code == 0
    for name in POPULATION:
        assert name in out


def test_prove_population_allocator_and_ops_split() -> None:
    code, out = run("prove", "population", "plpa+", "--w-max", "2", "--json")
    assert code == 0, out
    doc = json.loads(out)
    assert doc["result"] == "proved"
    assert [t["theorem"] for t in doc["theorems"]] == [
        "ops-split",
        "pool-never-short",
        "user-windows",
    ]
    code, out = run("prove", "population", "ops", "--variant", "published")
    assert code == 1
    assert "n=10, candidate window 2 (z=2, R=2), user window 5: 3 reports fit" in out
    code, out = run("prove", "population", "lpd", "--arithmetic", "float")
    assert code == 2 and "No such option '--arithmetic'" in out


def test_prove_local_budget_division_uses_the_fixed_kernel_theorem() -> None:
    code, out = run("prove", "allocator", "lba", "--w-max", "2", "--classes", "1")
    assert code == 0, out
    assert "PROVED" in out and "every w_i consecutive slots" in out


def _csv_stream(tmp_path: Path, users: int, slots: int, skip: int = 0) -> tuple[Path, Path]:
    """User u0 alone holds value 1 (others 0 or 2); ``skip`` drops every skip-th row."""
    rows = ["user,slot,value"]
    for u in range(users):
        for t in range(1, slots + 1):
            rows.append(f"u{u},{t},{1 if u == 0 else (u + t) % 2 * 2}")
    if skip:
        rows = [r for i, r in enumerate(rows) if i == 0 or i % skip]
    stream = tmp_path / "stream.csv"
    stream.write_text("\n".join(rows) + "\n")
    req = tmp_path / "req.csv"
    req.write_text("user,w,epsilon\n" + "".join(f"u{u},5,1\n" for u in range(users)))
    return stream, req


@pytest.mark.parametrize("mechanism", ["lpd", "plpa+"])
def test_csv_population_runs_perturb_the_drawn_users_own_values(
    mechanism: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The values that enter each report round are exactly the drawn (and charged) users'
    recorded values: u0's value 1 is reported only in slots where u0 was drawn."""
    import wevent.mechanisms.local as local
    from wevent.mechanisms.allocators import classes_of
    from wevent.mechanisms.allocators.algebra import ExactAlgebra
    from wevent.mechanisms.allocators.local import population_setup
    from wevent.mechanisms.allocators.population import PopulationKernel
    from wevent.verifier.guard import Guard

    stream_path, req = _csv_stream(tmp_path, 40, 60)
    pop = read_requirements([req])
    stream = open_stream(str(stream_path), pop, None, 0, 3)
    seen: list[object] = []
    original = local.report

    def spy(budgets: object, counts: object, *args: object, **kwargs: object) -> object:
        seen.append(counts)
        return original(budgets, counts, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(local, "report", spy)
    setup = population_setup(mechanism, classes_of(pop, mechanism), [40], 3)
    users = list(pop.classes[0].members)
    runner = local.PopulationRunner(
        setup=setup,
        kernel=PopulationKernel(mechanism, ExactAlgebra(), setup.config),
        spender=Guard(pop),
        users=users,
        class_of=np.zeros(40, np.int64),
        stream=stream,
        data_rng=np.random.default_rng(1),
        noise_rng=np.random.default_rng(2),
        pool_rng=np.random.default_rng(3),
        value_rng=np.random.default_rng(4),
        mechanism=mechanism,
    )
    for _ in range(60):
        seen.clear()
        runner.step()
        drawn = [users[i] for part in runner.drawn.values() for i in part.tolist()]
        ones = sum(int(np.asarray(c)[0][1]) for c in seen)
        assert ones == drawn.count("u0")


def test_csv_population_runs_need_every_value(tmp_path: Path) -> None:
    stream, req = _csv_stream(tmp_path, 40, 20, skip=7)
    code, out = run("run", "lpd", "-r", str(req), "--stream", str(stream), "--domain", "3")
    assert code == 2 and "every user needs a row at every slot" in out
    code, out = run("run", "lbd", "-r", str(req), "--stream", str(stream), "--domain", "3")
    assert code == 0, out  # budget division charges whole classes: gaps are harmless


def test_zero_budget_users_never_report(tmp_path: Path) -> None:
    req = tmp_path / "req.csv"
    req.write_text(
        "user,w,epsilon\n"
        + "".join(f"a{i},3,1\n" for i in range(20))
        + "".join(f"z{i},3,0\n" for i in range(10))
    )
    for mechanism in ("plpd", "plpa", "plpd+", "plba-rp"):
        ledger = tmp_path / f"{mechanism}.jsonl"  # a ledger is never overwritten
        code, out = run(
            "run", mechanism, "-r", str(req), "--stream", "sin", "--slots", "12",
            "--ledger", str(ledger),
        )  # fmt: skip
        assert code == 0, out
        charged = {u for u, ch in read_ledger(ledger).expanded() if ch.amount > 0}
        assert charged and not any(u.startswith("z") for u in charged)
    code, out = run("run", "lpd", "-r", str(req), "--stream", "sin", "--slots", "3")
    assert code == 2 and "eps = 0" in out


def test_dynamic_requirements_are_refused_with_a_local_hint(tmp_path: Path) -> None:
    req = tmp_path / "dyn.csv"
    req.write_text("user,slot,w_back,eps_back,w_fwd,eps_fwd\nu,1,2,1,2,1\n")
    code, out = run("trace", "lpd", "-r", str(req), "--decisions", "1")
    assert code == 2 and "no local allocator supports dynamic requirements" in out


def test_prove_ops_counterexample_replays_through_wevent_trace(tmp_path: Path) -> None:
    code, out = run("prove", "population", "ops", "--variant", "published", "--json")
    assert code == 1
    replay = json.loads(out)["replay"]
    req = tmp_path / "cex.csv"
    req.write_text(
        "user,w,epsilon\n"
        + "".join(f"{r['user']},{r['w']},{r['epsilon']}\n" for r in replay["requirements"])
    )
    decisions = ",".join(str(d) for d in replay["decisions"])
    code, out = run(
        "trace", replay["mechanism"], "-r", str(req), "--decisions", decisions,
        "--variant", "published", "--json",
    )  # fmt: skip
    assert code == 1
    refusal = json.loads(out)["refusal"]
    assert refusal["slot"] == replay["violation"]["slot"]
    assert refusal["window"] == replay["violation"]["window"]


def test_a_ledger_too_large_to_write_is_one_line_and_keeps_the_releases(
    req: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Out of memory while writing the ledger after the last slot: a one-line error (exit 2,
    no traceback), and the releases are still written."""
    import wevent.accounting.formats as formats

    def fail(*_args: object) -> None:
        raise MemoryError("malloc of size 9800000000 failed")

    monkeypatch.setattr(formats, "_parquet_table", fail)
    ledger, releases = tmp_path / "run.parquet", tmp_path / "rel.csv"
    code, out = run(
        "run", "plpa+", "-r", req, "--stream", "sin", "--slots", "6", "--domain", "2",
        "--ledger", str(ledger), "--releases", str(releases),
    )  # fmt: skip
    assert code == 2
    assert "cannot write the run's output" in out and "not enough memory" in out
    assert str(ledger) in out and "Traceback" not in out
    assert not ledger.exists() and not list(tmp_path.glob("*.tmp"))
    assert len(releases.read_text().splitlines()) == 1 + 6 * 2


def test_release_options_on_the_command_line(req: str, tmp_path: Path) -> None:
    """--post, --pool and --first-publication reach the local runners (simplex releases sum to
    the population), --threshold the central path; each refused, in one line with exit 2, where
    it does not apply."""
    out_csv = tmp_path / "rel.csv"
    code, out = run(
        "run", "lpd", "-r", req, "--stream", "sin", "--slots", "12", "--domain", "3",
        "--post", "simplex", "--pool", "--first-publication", "--releases", str(out_csv),
    )  # fmt: skip
    assert code == 0, out
    rows = out_csv.read_text().splitlines()[1:]
    by_slot: dict[str, float] = {}
    for row in rows:
        slot, _status, _cell, release, _truth = row.split(",")
        by_slot[slot] = by_slot.get(slot, 0.0) + float(release)
        assert float(release) >= 0
    assert all(total == pytest.approx(10) for total in by_slot.values())  # 10 users
    assert rows[0].split(",")[1] == "published"
    code, out = run("run", "bd", "-r", req, "--stream", "sin", "--slots", "5", "--pool")
    assert code == 2 and "apply to the local allocators" in out and "Traceback" not in out
    code, out = run("run", "bd", "-r", req, "--stream", "sin", "--slots", "5", "--threshold",
                    "kellaris")  # fmt: skip
    assert code == 0, out
    code, out = run("run", "lbd", "-r", req, "--stream", "sin", "--slots", "5", "--threshold",
                    "sqrt")  # fmt: skip
    assert code == 2 and "--threshold applies to the central" in out
