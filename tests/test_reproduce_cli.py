"""`wevent reproduce` and the experiment harness: outputs, determinism, the registry, errors."""

from __future__ import annotations

import csv
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from click.testing import CliRunner

from wevent.accounting.population import Population
from wevent.cli import cli
from wevent.experiments import harness, provenance, registry
from wevent.experiments.harness import (
    RESULT_COLUMNS,
    GuardRefused,
    Point,
    Row,
    RunResult,
    Size,
    Sweep,
    execute,
    fmt,
    run_sweep,
    sweep_groups,
    write_markdown,
    write_plots,
)
from wevent.experiments.papers import LDP_IDS, LDP_USERS, LDP_VOLATILITY, SWEEPS
from wevent.experiments.populations import pwsm_population, uniform_population
from wevent.experiments.stats import interval
from wevent.mechanisms.streams import SyntheticStream

TINY = ("--quick", "--users", "400", "--slots", "12", "--no-fingerprint")


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def saved_figures(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every matplotlib figure saved from now on, kept for inspection after it is written."""
    import matplotlib.figure

    saved: list[Any] = []
    real_savefig = matplotlib.figure.Figure.savefig

    def spy(fig: matplotlib.figure.Figure, *args: object, **kwargs: object) -> None:
        saved.append(fig)
        real_savefig(fig, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", spy)
    return saved


def read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _pop(point: Point, mechanism: str, users: int, seed: int) -> Population:
    return pwsm_population(users, point.epsilon, point.w, seed)


SMALL = Sweep(
    "test-sweep",
    "a test sweep",
    ("bd", "pba"),
    ("sin",),
    "epsilon",
    (Point(Fraction(1, 2), 40), Point(Fraction(1), 40)),
    _pop,
    ("amre", "ajsd"),
    Size(300, 10),
    Size(300, 10),
)


def test_sweep_writes_long_form_results_tables_and_plots(tmp_path: Path) -> None:
    rows, files = run_sweep(SMALL, tmp_path, repeats=2, quick=True, seed=7)
    names = {p.name for p in files}
    assert names == {"results.csv", "runs.csv", "table.md", "amre.png", "ajsd.png"}
    results = read(tmp_path / "results.csv")
    assert list(results[0])[: len(RESULT_COLUMNS)] == list(RESULT_COLUMNS)
    # 2 metrics x 1 dataset x 2 mechanisms x 2 points
    assert len(results) == len(rows) == 8
    assert {r["epsilon"] for r in results} == {"0.5", "1"}
    assert all(float(r["std"]) >= 0 for r in results)
    assert any(float(r["std"]) > 0 for r in results)  # two repeats with different seeds differ
    runs = read(tmp_path / "runs.csv")
    assert len(runs) == 2 * 2 * 2 and {r["seed"] for r in runs} == {"7", "8"}
    assert all(r["guard"] == "accepted" and int(r["ledger_rows"]) > 0 for r in runs)
    table = (tmp_path / "table.md").read_text()
    assert "| sin | bd |" in table and "ε=0.5" in table and "### AMRE" in table
    assert (tmp_path / "amre.png").read_bytes()[:4] == b"\x89PNG"
    # every mean and interval is the one of the runs' own values in runs.csv
    for r in results:
        values = [
            float(run[r["metric"]])
            for run in runs
            if (run["mechanism"], run["epsilon"]) == (r["mechanism"], r["epsilon"])
        ]
        iv = interval(values)
        assert int(r["runs"]) == len(values) == 2
        assert float(r["value"]) == pytest.approx(iv.mean, rel=1e-12)
        assert float(r["ci_low"]) == pytest.approx(iv.low, rel=1e-12)
        assert float(r["ci_high"]) == pytest.approx(iv.high, rel=1e-12)
        assert float(r["ci_low"]) <= float(r["value"]) <= float(r["ci_high"])
    half = (float(results[0]["ci_high"]) - float(results[0]["ci_low"])) / 2
    assert f"{fmt(float(results[0]['value']))} ± {fmt(half)}" in table


def test_one_repeat_reports_no_interval_and_no_zero_spread(tmp_path: Path) -> None:
    """A single run has no standard deviation and no interval (NaN, never 0)."""
    run_sweep(SMALL, tmp_path, repeats=1, quick=True, seed=7)
    results = read(tmp_path / "results.csv")
    assert {(r["runs"], r["std"], r["ci_low"], r["ci_high"]) for r in results} == {
        ("1", "nan", "nan", "nan")
    }
    assert "±" not in (tmp_path / "table.md").read_text()


def test_a_cell_made_of_fewer_runs_says_so(tmp_path: Path) -> None:
    """A metric undefined in some runs (NaN: an AUC without events) gives a cell of fewer runs
    than the table's repeats; the table names how many."""
    rows = [
        Row("x", "sin", "a", Fraction(1), 20, "auc", 0.6, 0.1, "", 3, 0.5, 0.7),
        Row("x", "sin", "b", Fraction(1), 20, "auc", 0.65, 0.07, "", 2, 0.0, 1.3),
        Row("x", "sin", "c", Fraction(1), 20, "auc", 0.9, math.nan, "", 1),
    ]
    table = write_markdown(rows, tmp_path / "t.md", "epsilon", ["1"], "h").read_text()
    assert "| a | 0.6 ± 0.1 |" in table
    assert "| b | 0.65 ± 0.65 (2 of 3 runs) |" in table
    assert "| c | 0.9 (1 of 3 runs) |" in table


def test_setting_axes_plot_one_line_per_sweep() -> None:
    """001 Section 6.5's two ratio sweeps and 000's two ablation sweeps are separate panels
    (a line never joins the last eps setting to the first w setting); one named list of
    settings stays one sweep with its full labels."""
    ratio = ["eps:o=0.1", "eps:o=0.5", "w:o=0.1", "w:o=0.5"]
    assert sweep_groups("setting", ratio) == [
        ("eps:o", [(0, "0.1"), (1, "0.5")]),
        ("w:o", [(2, "0.1"), (3, "0.5")]),
    ]
    assert [g for g, _ in sweep_groups("setting", ["eps=0.5", "eps=1.5", "w=40"])] == ["eps", "w"]
    cats = ["eps=1,w=20", "eps=2,w=20"]
    assert sweep_groups("setting", cats) == [("setting", [(0, cats[0]), (1, cats[1])])]
    # one named list of single values (002 Figure 6's N) is labelled by its name
    assert sweep_groups("setting", ["N=100", "N=200"]) == [("N", [(0, "100"), (1, "200")])]
    assert sweep_groups("w", ["10", "20"]) == [("w", [(0, "10"), (1, "20")])]


@pytest.mark.parametrize(
    ("datasets", "mechanisms"), [(("sin",), 2), (("sin",), 8), (("lns", "sin", "log"), 8)]
)
def test_plots_draw_error_bars_and_keep_the_legend_off_the_panels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, datasets: tuple[str, ...], mechanisms: int
) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.container import ErrorbarContainer

    rows = [
        Row("x", d, f"mechanism-{m}", Fraction(1), 20, "amse", v, 0.1, s, 3, v - 0.05, v + 0.05)
        for d in datasets
        for m, v in ((m, 0.2 + m / 10) for m in range(mechanisms))
        for s in ("eps=0.5", "eps=1", "w=10", "w=20")
    ]
    saved = saved_figures(monkeypatch)
    xs = ["eps=0.5", "eps=1", "w=10", "w=20"]
    (path,) = write_plots(rows, tmp_path, "setting", xs)
    assert path.read_bytes()[:4] == b"\x89PNG"
    (fig,) = saved
    axes = fig.get_axes()
    assert len(axes) == 2 * len(datasets)  # a row of panels per sweep
    assert all(ax.get_legend() is None for ax in axes) and len(fig.legends) == 1
    renderer = FigureCanvasAgg(fig).get_renderer()  # type: ignore[no-untyped-call]
    to_fig = fig.transFigure.inverted()
    legend_box = fig.legends[0].get_window_extent(renderer).transformed(to_fig)
    assert legend_box.x0 >= 0 and legend_box.x1 <= 1 and legend_box.y0 >= 0  # inside the figure
    for ax in axes:  # below every panel with its tick and axis labels
        panel = ax.get_tightbbox(renderer)
        assert panel is not None and legend_box.y1 <= panel.transformed(to_fig).y0
    for ax in axes:  # one error-bar line per mechanism, two points each (its sweep's)
        bars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
        assert len(bars) == mechanisms
        assert all(np.asarray(c.lines[0].get_xdata()).size == 2 for c in bars)


def test_same_seed_same_results(tmp_path: Path) -> None:
    run_sweep(SMALL, tmp_path / "a", repeats=1, quick=True, seed=3)
    run_sweep(SMALL, tmp_path / "b", repeats=1, quick=True, seed=3)
    run_sweep(SMALL, tmp_path / "c", repeats=1, quick=True, seed=4)
    a = (tmp_path / "a" / "results.csv").read_text()
    assert a == (tmp_path / "b" / "results.csv").read_text()
    assert a != (tmp_path / "c" / "results.csv").read_text()


def test_execute_returns_releases_truth_and_reports() -> None:
    pop = uniform_population(200, 10, Fraction(1))
    res = execute("lbu", pop, "log", 5, seed=0)
    assert res.release.shape == res.truth.shape == (5, 2)
    assert (res.truth.sum(axis=1) == 200).all()
    assert res.reports == 200 * 5  # LBU: every user reports once per slot (002 Section 5.4.3)


def test_a_guard_refusal_stops_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    import wevent.experiments.running as running
    from wevent.mechanisms.central import InvalidAllocation

    real = running.run_mechanism

    def refused(*args: object, **kwargs: object) -> running.RunSummary:
        summary = real(*args, **kwargs)  # type: ignore[arg-type]
        summary.refusal = InvalidAllocation("refused for the test")
        return summary

    monkeypatch.setattr(running, "run_mechanism", refused)
    with pytest.raises(GuardRefused, match="refused for the test"):
        execute("lbu", uniform_population(50, 5, Fraction(1)), "sin", 3, seed=0)


def test_registry_has_every_experiment_of_the_issue() -> None:
    assert set(registry.EXPERIMENTS) == {
        "ldp-ids-epsilon",
        "ldp-ids-w",
        "pwsm-epsilon",
        "pwsm-w",
        "pwsm-ratio",
        "pwsm-time",
        "pldp-epsilon",
        "pldp-w",
        "pldp-ablation",
        "ldp-ids-users",
        "ldp-ids-volatility",
        "cfpu",
        "roc",
        "exsub",
        "exsub-tables",
        "streamdp-baselines",
    }
    assert SWEEPS["ldp-ids-epsilon"].mechanisms == LDP_IDS
    assert SWEEPS["pwsm-epsilon"].mechanisms == ("bd", "ba", "plbu", "pbd", "pba", "dpbd", "dpba")
    assert set(SWEEPS["pldp-ablation"].mechanisms) >= {"plbd-rp", "plba-rp", "plbd-ops", "plba-ops"}


def test_a_plugged_in_experiment_runs_through_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[Path, int, bool, int]] = []

    def fake(out_dir: Path, repeats: int, quick: bool, seed: int) -> list[Path]:
        seen.append((out_dir, repeats, quick, seed))
        path = out_dir / "results.csv"
        path.write_text(",".join(RESULT_COLUMNS) + "\n")
        return [path]

    monkeypatch.setattr(registry, "EXPERIMENTS", dict(registry.EXPERIMENTS))
    registry.register(registry.Experiment("fake", fake, "a plugged-in experiment"))
    with pytest.raises(ValueError, match="taken"):
        registry.register(registry.Experiment("fake", fake, "again"))
    code, out, _ = run(
        "reproduce",
        "fake",
        "--quick",
        "--out",
        str(tmp_path / "f"),
        "--seed",
        "5",
        "--no-fingerprint",
    )
    assert code == 0, out
    assert seen == [(tmp_path / "f", 3, True, 5)]  # --quick: three repeats, an interval
    assert "results.csv" in out
    # a size override an experiment cannot take is refused before anything runs, fingerprints
    # included (for `all` they would take half a minute)
    ran: list[str] = []

    def spy(name: str) -> str:
        ran.append(name)
        return ""

    monkeypatch.setattr(provenance, "fingerprint", spy)
    code, _, err = run("reproduce", "fake", "--users", "10", "--out", str(tmp_path / "g"))
    assert code == 2 and "does not take --users" in err
    code, _, err = run("reproduce", "all", "--users", "10", "--out", str(tmp_path / "h"))
    assert code == 2 and "do not apply to" in err and "fake" in err
    assert not (tmp_path / "h").exists() and ran == []


def test_cli_quick_ldp_ids_smoke(tmp_path: Path) -> None:
    code, out, err = run("reproduce", "ldp-ids-epsilon", *TINY, "--out", str(tmp_path))
    assert code == 0, err
    results = read(tmp_path / "results.csv")
    assert {r["mechanism"] for r in results} == set(LDP_IDS)
    assert {r["dataset"] for r in results} == {"lns", "sin", "log"}
    assert {r["metric"] for r in results} == {"mre", "amse", "cfpu"}
    assert {r["epsilon"] for r in results} == {"0.5", "1.5", "2.5"}  # quick: 3 of the 5 points
    lbu = [r for r in results if r["mechanism"] == "lbu" and r["metric"] == "cfpu"]
    assert all(float(r["value"]) == 1.0 for r in lbu)  # 002 Table 2: LBU's CFPU is 1
    for name in ("mre.png", "amse.png", "cfpu.png", "table.md", "runs.csv"):
        assert (tmp_path / name).exists()
    assert f"wrote {tmp_path / 'results.csv'}" in out


def test_cli_quick_pwsm_smoke(tmp_path: Path) -> None:
    code, _, err = run("reproduce", "pwsm-w", *TINY, "--out", str(tmp_path))
    assert code == 0, err
    results = read(tmp_path / "results.csv")
    assert {r["mechanism"] for r in results} == set(SWEEPS["pwsm-w"].mechanisms)
    assert {r["w"] for r in results} == {"40", "120", "200"}
    assert all(float(r["value"]) >= 0 for r in results)


def test_cli_roc_writes_curves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    saved = saved_figures(monkeypatch)
    code, _, err = run("reproduce", "roc", *TINY, "--out", str(tmp_path))
    assert code == 0, err
    points = read(tmp_path / "roc_points.csv")
    assert {p["mechanism"] for p in points} == {"lba", "lsp", "lpu", "lpd", "lpa"}
    assert (tmp_path / "roc.png").read_bytes()[:4] == b"\x89PNG"
    # each panel's legend (with its AUCs) sits below the panel, off the curves, in the figure
    (fig,) = [f for f in saved if f.axes[0].get_xlabel() == "false positive rate"]
    renderer = FigureCanvasAgg(fig).get_renderer()  # type: ignore[no-untyped-call]
    for ax in fig.axes:
        legend = ax.get_legend()
        assert legend is not None
        box = legend.get_window_extent(renderer)
        assert box.y1 <= ax.get_window_extent(renderer).y0 and box.y0 >= 0
    for r in read(tmp_path / "results.csv"):
        assert r["metric"] == "auc"
        assert r["value"] == "nan" or 0 <= float(r["value"]) <= 1


def test_cli_writes_provenance_and_a_fingerprint(tmp_path: Path) -> None:
    out = tmp_path / "roc"
    out.mkdir()
    (out / "old.csv").write_text("left by an earlier run\n", encoding="utf-8")
    code, stdout, err = run("reproduce", "roc", "--quick", "--users", "300", "--out", str(out))
    assert code == 0, err
    record = provenance.read_provenance(out / "provenance.json")
    assert record["command"] == (
        f"wevent reproduce roc --quick --users 300 --repeats 3 --seed 0 --out {out.as_posix()}"
    )
    assert record["seeds"] == [0, 1, 2] and record["users"] == 300 and record["slots"] is None
    assert record["fingerprint"] == {"users": 500, "slots": 30, "seed": 0, "repeats": 1}
    assert set(record["files"]) == {p.name for p in out.iterdir()} - {"provenance.json", "old.csv"}
    assert (out / "fingerprint.csv").read_text(encoding="utf-8") == provenance.fingerprint("roc")
    problems = provenance.check_directory(out)  # a dirty working tree may add one more
    assert [p for p in problems if "clean git commit" not in p] == [
        f"{out / 'old.csv'}: not written by the recorded run"
    ]
    (out / "old.csv").unlink()
    assert f"wrote {out / 'provenance.json'}" in stdout
    # Without a fingerprint, an earlier one is removed (it would not describe these results)
    code, _, err = run("reproduce", "roc", *TINY, "--out", str(out))
    assert code == 0, err
    assert not (out / "fingerprint.csv").exists()
    assert "without a fingerprint" in " ".join(provenance.check_directory(out))


def test_cli_user_mistakes_are_one_line_exit_2(tmp_path: Path) -> None:
    code, _, err = run("reproduce", "nope", "--quick", "--out", str(tmp_path))
    assert code == 2 and err.count("\n") == 1 and "unknown experiment 'nope'" in err
    assert "ldp-ids-epsilon" in err and "all" in err
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, _, err = run("reproduce", "cfpu", "--quick", "--out", str(blocker))
    assert code == 2 and "Traceback" not in err
    code, _, err = run("reproduce", "cfpu", "--repeats", "0")
    assert code == 2 and "Traceback" not in err


def test_cli_help_lists_the_experiments() -> None:
    code, out, _ = run("reproduce", "--help")
    assert code == 0
    for name in [*registry.EXPERIMENTS, "all"]:
        assert name in out
    assert "--quick" in out and "results.csv" in out


@pytest.mark.slow
def test_cli_every_experiment_quick_tiny(tmp_path: Path) -> None:
    """Every registered experiment runs: the sized ones at a tiny size, the others (ExSub) at
    their quick size."""
    for name, exp in registry.EXPERIMENTS.items():
        size = ["--users", "600", "--slots", "10"] if exp.sized is not None else []
        out = tmp_path / name
        code, _, err = run("reproduce", name, "--quick", *size, "--out", str(out))
        assert code == 0, err
        assert (out / "results.csv").exists()


def test_every_mechanism_of_a_setting_sees_the_same_stream() -> None:
    # run_sweep promises that all mechanisms of a setting see the same data; population
    # allocators used to draw their reporters' values from the stream's generator, so their true
    # stream drifted from the others' after the first draw.
    pop = uniform_population(2000, 10, Fraction(1))
    truths = {m: execute(m, pop, "sin", 40, 3).truth for m in LDP_IDS}
    first = truths["lbu"]
    for mechanism, truth in truths.items():
        assert np.array_equal(truth, first), mechanism


def _uniform(point: Point, mechanism: str, users: int, seed: int) -> Population:
    return uniform_population(users, point.w, point.epsilon)


def _spy_streams(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int, int, dict[str, float]]]:
    """Record every synthetic stream a sweep builds: its kind, users, seed and options."""
    made: list[tuple[str, int, int, dict[str, float]]] = []
    real = SyntheticStream

    def spy(
        kind: str, slots: int, sizes: list[int], seed: int, d: int = 2, **options: float
    ) -> SyntheticStream:
        made.append((kind, sum(sizes), seed, options))
        return real(kind, slots, sizes, seed, d, **options)

    monkeypatch.setattr(harness, "SyntheticStream", spy)
    return made


def test_a_population_sweep_runs_each_point_with_its_own_users(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 002 Figure 6(a)(b): the users of a point are its share of the size's users, and the
    # stream keeps the same probability sequence at every N for a seed.
    made = _spy_streams(monkeypatch)
    truths: dict[tuple[str, str, int], npt.NDArray[np.float64]] = {}

    def keep(dataset: str, mech: str, point: Point, r: int, res: RunResult) -> None:
        assert res.truth.sum(axis=1).tolist() == [res.users] * res.slots
        truths[(dataset, point.setting, r)] = res.truth[:, 1] / res.users

    sweep = Sweep(
        "users-test",
        "N",
        ("lbu", "lpu"),
        ("lns", "sin"),
        "setting",
        LDP_USERS,
        _uniform,
        ("mre",),
        Size(800, 40),
        Size(800, 40),
        oracle="grr",
    )
    rows, _ = run_sweep(sweep, tmp_path, repeats=2, quick=True, seed=5, keep=keep)
    wanted = {"N=100": 100, "N=200": 200, "N=400": 400, "N=600": 600, "N=800": 800}
    assert [sweep.x(p.at(800)) for p in LDP_USERS] == list(wanted)
    runs = read(tmp_path / "runs.csv")
    assert len(runs) == 5 * 2 * 2 * 2
    for line in runs:
        assert int(line["users"]) == wanted[line["setting"]], line
    assert {r.setting for r in rows} == set(wanted)
    # every run's stream had the point's users; per seed, one probability sequence at every N
    assert sorted({n for _, n, _, _ in made}) == sorted(wanted.values())
    assert all(options == {} for *_, options in made)
    table = (tmp_path / "table.md").read_text()
    assert "N users per column (up to 800)" in table and "| N=100 |" in table
    # the true frequencies at different N are draws around the same p_t: closer at larger N
    for dataset in ("lns", "sin"):
        p = SyntheticStream(dataset, 40, [1], seed=5).probabilities
        gaps = [np.abs(truths[(dataset, x, 0)] - p).mean() for x in ("N=100", "N=800")]
        assert gaps[1] < gaps[0]
        assert np.abs(truths[(dataset, "N=800", 0)] - p).max() < 0.1


def test_a_volatility_sweep_runs_each_setting_on_its_own_stream_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 002 Figure 6(c)(d): sqrt(Q) varies LNS only and b varies Sin only; no cell of the other
    # stream is run or shown.
    made = _spy_streams(monkeypatch)
    sweep = Sweep(
        "volatility-test",
        "Q, b",
        ("lbu", "lsp"),
        ("lns", "sin"),
        "setting",
        LDP_VOLATILITY,
        _uniform,
        ("mre",),
        Size(300, 30),
        Size(300, 30),
        oracle="grr",
    )
    rows, _ = run_sweep(sweep, tmp_path, repeats=1, quick=True, seed=0)
    runs = read(tmp_path / "runs.csv")
    assert len(runs) == 10 * 2  # 5 sqrt(Q) on LNS + 5 b on Sin, two mechanisms
    assert {(r["dataset"], r["setting"].split("=")[0]) for r in runs} == {
        ("lns", "sqrtQ"),
        ("sin", "b"),
    }
    assert {(r.dataset, r.setting.split("=")[0]) for r in rows} == {("lns", "sqrtQ"), ("sin", "b")}
    assert all(int(r["users"]) == 300 for r in runs)
    # the streams that ran had the setting's parameter
    for kind, users, _, options in made:
        assert users == 300
        if kind == "lns":
            assert set(options) == {"lns_sqrt_q"}
        else:
            assert kind == "sin" and set(options) == {"sin_period"}
    q = sorted({o["lns_sqrt_q"] for k, _, _, o in made if k == "lns"})
    assert q == [0.001, 0.002, 0.0025, 0.004, 0.006]
    b = sorted({2 * np.pi / o["sin_period"] for k, _, _, o in made if k == "sin"})
    assert b == [0.005, 0.01, 0.02, 0.04, 0.08]  # exactly: 2 pi / (2 pi / b) == b here
    # b = 0.01 is exactly the default Sin stream (2 pi / (2 pi / b) == b in floating point)
    default = next(o for k, _, _, o in made if k == "sin" and 2 * np.pi / o["sin_period"] == 0.01)
    np.testing.assert_array_equal(
        SyntheticStream("sin", 30, [1], 0, **default).probabilities,  # type: ignore[arg-type]
        SyntheticStream("sin", 30, [1], 0).probabilities,
    )
    # the table leaves the other stream's columns empty
    table = (tmp_path / "table.md").read_text()
    lines = table.splitlines()
    assert lines[lines.index("### MRE") + 2].startswith(
        "| dataset | mechanism | sqrtQ=0.001 | sqrtQ=0.002 | sqrtQ=0.0025 | sqrtQ=0.004 |"
    )
    body = [line for line in lines if line.startswith("| ") and "---" not in line][1:]
    assert len(body) == 4  # lns x (lbu, lsp), sin x (lbu, lsp)
    for number, line in enumerate(body):
        cells = [c.strip() for c in line.strip("|").split("|")][2:]
        assert len(cells) == 10
        lns = number < 2
        assert all(cells[:5]) == lns and any(cells[5:]) != lns
        assert all(cells[5:]) != lns and any(cells[:5]) == lns
    # and the plot leaves the panels of a sweep on the other stream blank

    saved = saved_figures(monkeypatch)
    write_plots(rows, tmp_path, "setting", [sweep.x(p) for p in LDP_VOLATILITY])
    (fig,) = saved
    # panels row by row: (lns, sqrtQ), (sin, sqrtQ), (lns, b), (sin, b)
    drawn = [(ax.get_title(), ax.axison) for ax in fig.get_axes()]
    assert drawn == [("lns, sqrtQ", True), ("", False), ("", False), ("sin, b", True)]


def test_the_registered_data_sweeps_pair_each_setting_with_its_stream() -> None:
    users, volatility = SWEEPS["ldp-ids-users"], SWEEPS["ldp-ids-volatility"]
    for sweep in (users, volatility):
        assert sweep.mechanisms == LDP_IDS and sweep.datasets == ("lns", "sin")
        assert sweep.full == Size(200_000, 800)  # 002 Section 7.1.1
        assert {(p.epsilon, p.w) for p in sweep.points} == {(Fraction(1), 30)}  # Figure 6
    assert [p.at(200_000).setting for p in users.points] == [
        f"N={n}" for n in (25_000, 50_000, 100_000, 150_000, 200_000)
    ]
    for p in volatility.points:
        name, _, value = p.setting.partition("=")
        ((option, got),) = p.stream
        if name == "sqrtQ":
            assert p.datasets == ("lns",) and option == "lns_sqrt_q" and got == float(value)
        else:
            assert name == "b" and p.datasets == ("sin",) and option == "sin_period"
            assert 2 * np.pi / got == float(value)


def test_cli_population_sweep_smoke(tmp_path: Path) -> None:
    code, _, err = run(
        "reproduce",
        "ldp-ids-users",
        "--quick",
        "--users",
        "600",
        "--slots",
        "12",
        "--repeats",
        "1",
        "--no-fingerprint",
        "--out",
        str(tmp_path),
    )
    assert code == 0, err
    runs = read(tmp_path / "runs.csv")
    assert {(r["setting"], r["users"]) for r in runs} == {
        ("N=75", "75"),
        ("N=300", "300"),
        ("N=600", "600"),
    }
