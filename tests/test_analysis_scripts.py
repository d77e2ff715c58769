"""The analysis scripts behind docs/reproduction.md's explanations run, and print the numbers the
page quotes (analytic modes only: seconds; their simulations are documented in
analysis/README.md)."""

from __future__ import annotations

import importlib
import math
import subprocess
import sys
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from tests.analysis_import import analysis_module
from wevent.accounting.spending import BudgetExceeded

ANALYSIS = Path(__file__).resolve().parent.parent / "analysis"


@pytest.fixture
def ducode() -> Iterator[ModuleType]:
    """analysis/pwsm_ratio_ducode.py as a module (it imports its sibling pwsm_absolute, as it
    does when run from the command line)."""
    with analysis_module("pwsm_ratio_ducode") as module:
        yield module


def output(script: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(ANALYSIS / script), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_exsub_portions_shows_the_calibrated_rule_ties_uniform() -> None:
    out = output("exsub_portions.py", "--settings", "T32", "--no-best")
    # 004 Algorithm 2's exact prefix coefficient sums per level at T = 32: the top residue
    # serves x_T alone, yet 004 VI-D's portions give it 43% of the users.
    assert "|          272 | 0.039 |" in out and "|            1 | 0.432 | 0.000 |" in out
    assert out.count("prop-c == uniform == H C exactly: True") == 3
    assert "| prefix | 3.006 | 467 | 1.449 / 1.234 |" in out


def test_exsub_table2_shows_the_printed_numbers_fit_fifty_thousand_users() -> None:
    out = output("exsub_table2.py")
    assert (
        "| 1 | 5 | 8 | 3.64 | 8.436 (x2.32) | 8.052 (x2.21) | 3.773 (x1.04) | 3.601 (x0.99) |"
        in out
    )
    assert "| 1 | 36 | 4.13 | 8.96 (x2.17) | 4.007 (x0.97) |" in out  # the Collision row


def test_pldp_baselines_bounds_the_gain_over_budget_division() -> None:
    out = output("pldp_baselines.py")
    assert "| 1.5 | 120 | 288.5 | 2.29 | 0.439 | >= 80.9% | 56.1% |" in out
    assert "Fig. 2 81.0%, Fig. 3 80.9%" in out


def test_pwsm_absolute_pins_the_papers_user_count() -> None:
    out = output("pwsm_absolute.py", "--slots", "2000", "--seeds", "1", "--no-check")
    assert "Sin   exact     10000   18,182,987   T5 0.9915-0.9969x" in out
    assert "Log   exact     10000    6,350,190   T5 0.9919-0.9976x" in out


def test_roc_staleness_predicts_lsp_falls_on_faster_streams() -> None:
    out = output("roc_staleness.py", "--no-simulate")
    assert "| 144 | 2.88 | 0.314 | 0.877 | 0.715 |" in out


def test_pwsm_ratio_users_finds_where_obs_switches() -> None:
    out = output("pwsm_ratio_users.py", "--no-simulate")
    assert (
        "| 10,000 | 0.887 | 0.6 | 0.6 | 0.6 | 0.6 | 0.6 | 0.6 | 0.6 | 0.6 | 1.0 | 200 | 3 |" in out
    )


def test_pwsm_ratio_ducode_drops_under_the_authors_kernel_only() -> None:
    out = output(
        "pwsm_ratio_ducode.py",
        *("--slots", "300", "--seeds", "1", "--datasets", "sin", "--sweeps", "eps"),
        *("--ratios", "0.7,0.9"),
    )
    # (a): the script's sound run (guard in the loop) equals the reproduce path.
    assert "| eps:o | Sin | 0.9 | 0 | 47,848.137 | 47,848.137 |" in out
    assert "| w:o | Sin | 0.7 | 0 | 11,306.924 | 11,306.924 |" in out
    # DC's OBS: the dissimilarity step leaves the lowest share at n_lo <= 1,129 (eps:o) or 798
    # (w:o), so at N = 10,000 the window sweep never switches at o = 0.9.
    assert "| eps:o | 1/400, 1/240 | 1,129 | 0.887 |" in out
    assert "| w:o | 1/400, 3/400 | 798 | 0.920 |" in out
    # The sound PBA rises from o = 0.7 to 0.9; the du-code kernel (never nullifying) drops, with
    # more publications (the DC sample biased by the switch) at the same ~96 shares.
    assert "| Sin | sound | 11,307 [39] | 47,848 [71] | -323.2%, -323% .. -323% |" in out
    assert "| Sin | du-code | 1,418 [163] | 1,103 [270] | 22.2%, 22% .. 22% |" in out
    assert "| Sin | du-code | 0.9 | 100% | 270 | 95.7 | 0% |" in out
    # The authors' runner (restarts every 250 slots, p_t rounded) changes both kernels' numbers.
    assert "| Sin | runner | 17,971 [41] | 76,605 [66] | -326.3%, -326% .. -326% |" in out
    assert "| Sin | authors | 4,443 [166] | 2,624 [266] | 40.9%, 41% .. 41% |" in out


def test_pwsm_ratio_ducode_rounded_walk_is_pwsm_absolute_s5_on_wevents_draws(
    ducode: ModuleType,
) -> None:
    from pwsm_absolute import probabilities

    from wevent.mechanisms.streams import SyntheticStream

    for seed in (0, 3):
        rounded = ducode.RoundedStream("lns", 500, [10], seed).probabilities
        assert np.array_equal(rounded, probabilities("lns", 500, np.random.default_rng(seed), True))
        assert np.array_equal(np.round(rounded, 2), rounded)  # every step rounded
        exact = probabilities("lns", 500, np.random.default_rng(seed), False)
        assert np.array_equal(exact, SyntheticStream("lns", 500, [10], seed).probabilities)
        sin = ducode.RoundedStream("sin", 500, [10], seed).probabilities
        assert np.array_equal(
            sin, np.round(SyntheticStream("sin", 500, [10], seed).probabilities, 2)
        )
    assert ducode.SEGMENT == 250


def test_pwsm_ratio_ducode_refuses_a_run_whose_probe_saw_no_charges(
    ducode: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    pop = ducode.budget_ratio_population(1000, Fraction(9, 10), 0)
    ok = ducode.run(pop, "sin", 60, 0, ducode.SETTINGS[2])
    assert ok.publications > 0 and ok.dc_sampled == 1.0
    monkeypatch.setattr(ducode.Probe, "_charge", ducode.CentralRunner._charge)
    with pytest.raises(RuntimeError, match="recorded no charges"):
        ducode.run(pop, "sin", 60, 0, ducode.SETTINGS[2])


def test_pwsm_ratio_ducode_runs_the_sound_kernel_under_the_guard(
    ducode: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    from wevent.verifier.guard import Guard

    seen: list[int] = []

    class Counting(Guard):
        def spend_many(self, charges):  # type: ignore[no-untyped-def]
            seen.extend(c.slot for c in charges)
            super().spend_many(charges)

    pop = ducode.budget_ratio_population(1000, Fraction(9, 10), 0)
    monkeypatch.setattr(ducode, "Guard", Counting)
    ducode.run(pop, "sin", 300, 0, ducode.SETTINGS[1])  # the runner: two segments
    assert seen and max(seen) > 250 and seen == sorted(seen)  # stream slots, shifted
    seen.clear()
    ducode.run(pop, "sin", 60, 0, ducode.SETTINGS[3])  # du-code: no guard
    assert not seen


def test_pwsm_ratio_ducode_shuffle_is_the_stream_with_its_p_permuted(
    ducode: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`run(..., shuffle=k)` feeds the slots in `pwsm_absolute.slot_order(slots, k)`: the
    histograms of slot t are the base stream's at slot order[t - 1] + 1 from the same draws, and
    a whole run equals a run on the rounded stream whose p sequence is permuted beforehand (as
    `pwsm_absolute.personal_run` builds it)."""
    from pwsm_absolute import slot_order

    base = ducode.RoundedStream("sin", 500, [10, 20], 0)
    order = slot_order(500, 1)
    shuffled = ducode.Reordered(base, order)
    assert np.array_equal(shuffled.probabilities, base.probabilities[order])
    assert not np.array_equal(shuffled.probabilities, base.probabilities)
    one, two = np.random.default_rng(5), np.random.default_rng(5)
    for t in (1, 2, 250, 500):
        assert np.array_equal(
            shuffled.histograms(t, one), base.histograms(int(order[t - 1]) + 1, two)
        )
    with pytest.raises(ValueError, match="not a permutation"):
        ducode.Reordered(base, order[:-1])

    pop = ducode.window_ratio_population(1000, Fraction(9, 10), 0)
    authors = ducode.SETTINGS[3]
    assert authors.name == "authors" and authors.runner and authors.variant == "du-code"
    got = ducode.run(pop, "sin", 300, 0, authors, "as is", "pbd", 1)
    assert got != ducode.run(pop, "sin", 300, 0, authors, "as is", "pbd", None)
    assert got != ducode.run(pop, "sin", 300, 0, authors, "as is", "pbd", 2)
    assert got != ducode.run(pop, "sin", 300, 0, authors, "as is", "pba", 1)  # the kernel asked

    class Permuted(ducode.RoundedStream):  # type: ignore[misc,name-defined]
        def __init__(self, kind: str, slots: int, sizes: list[int], seed: int) -> None:
            super().__init__(kind, slots, sizes, seed)
            p = np.array(self.probabilities[slot_order(slots, 1)])
            p.setflags(write=False)
            self._p = p

    # one order for every data seed: seed 1's run is seed 1's stream permuted by slot_order 1 too
    pop1 = ducode.window_ratio_population(1000, Fraction(9, 10), 1)
    got1 = ducode.run(pop1, "sin", 300, 1, authors, "as is", "pbd", 1)
    monkeypatch.setattr(ducode, "RoundedStream", Permuted)
    assert ducode.run(pop, "sin", 300, 0, authors, "as is", "pbd", None) == got
    assert ducode.run(pop1, "sin", 300, 1, authors, "as is", "pbd", None) == got1


def test_pwsm_ratio_ducode_asks_each_mechanism_for_its_settings_kernel(
    ducode: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PBD and PBA get the kernel variant of the setting (du-code in the authors' setting), one
    fresh kernel per 250-slot segment with the authors' runner, shuffled or not. The restarted
    sound PBD kernel (the runner setting) forgets the publications of the window before the
    restart: the guard refuses its first publication after it."""
    asked: list[tuple[str, str]] = []
    real = ducode.kernel_for

    def recording(name: str, alg: Any, classes: Any, variant: str) -> Any:
        asked.append((name, variant))
        return real(name, alg, classes, variant)

    monkeypatch.setattr(ducode, "kernel_for", recording)
    assert [(s.variant, s.runner) for s in ducode.SETTINGS] == [
        ("sound", False),
        ("sound", True),
        ("du-code", False),
        ("du-code", True),
    ]
    pop = ducode.budget_ratio_population(1000, Fraction(9, 10), 0)
    for setting in ducode.SETTINGS:
        for mechanism in ("pba", "pbd"):
            for shuffle in (None, 1):
                asked.clear()
                if setting.name == "runner" and mechanism == "pbd":
                    with pytest.raises(BudgetExceeded, match=r"refused spend at slot 25[12] "):
                        ducode.run(pop, "sin", 300, 0, setting, "as is", mechanism, shuffle)
                else:
                    ducode.run(pop, "sin", 300, 0, setting, "as is", mechanism, shuffle)
                assert asked == [(mechanism, setting.variant)] * (2 if setting.runner else 1)


def test_pwsm_ratio_ducode_reports_a_refused_run_as_a_row(
    ducode: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    """A setting whose run the guard refuses prints one row saying so, and the table goes on."""
    runner, authors = ducode.SETTINGS[1], ducode.SETTINGS[3]
    ratios = [Fraction(7, 10), Fraction(9, 10)]
    ducode.sweep_table("eps", ["sin"], 1000, 300, 1, ratios, ["pbd"], [runner, authors])
    rows = [x for x in capsys.readouterr().out.splitlines() if x.startswith("| Sin | PBD ")]
    assert rows[0] == (
        "| Sin | PBD runner | not w-event private: wevent's guard refused a charge at slot 251 "
        "(o = 0.7, seed 0) |"
    )
    assert rows[1].startswith("| Sin | PBD authors | ") and "%" in rows[1]
    # --guard-all: the du-code PBD kernel unrestarted passes the guard, restarted it does not
    dc, nine = ducode.SETTINGS[2], [Fraction(9, 10)]
    ducode.sweep_table("eps", ["sin"], 1000, 300, 1, nine, ["pbd"], [dc, authors], (), True)
    rows = [x for x in capsys.readouterr().out.splitlines() if x.startswith("| Sin | PBD ")]
    assert rows[0].startswith("| Sin | PBD du-code | ") and "[" in rows[0]
    assert rows[1] == (
        "| Sin | PBD authors | not w-event private: wevent's guard refused a charge at slot 251 "
        "(o = 0.9, seed 0) |"
    )


def test_pwsm_ratio_ducode_a_refusal_in_the_sound_setting_propagates(
    ducode: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Only a restarted or du-code kernel may be refused; a refusal of wevent's own kernel run
    once (`sound`) is a fault of wevent, not a row."""
    pop = ducode.budget_ratio_population(1000, Fraction(7, 10), 0)
    with pytest.raises(BudgetExceeded) as caught:
        ducode.run(pop, "sin", 300, 0, ducode.SETTINGS[1], "as is", "pbd")
    refusal = caught.value

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise refusal

    monkeypatch.setattr(ducode, "run", refused)
    ratios = [Fraction(7, 10)]
    for setting in ducode.SETTINGS[1:]:
        ducode.sweep_table("eps", ["sin"], 1000, 300, 1, ratios, ["pbd"], [setting])
        assert "refused a charge at slot 251 (o = 0.7, seed 0) |" in capsys.readouterr().out
    with pytest.raises(BudgetExceeded):
        ducode.sweep_table("eps", ["sin"], 1000, 300, 1, ratios, ["pbd"], [ducode.SETTINGS[0]])


def test_pwsm_ratio_ducode_change_column_pairs_the_last_two_ratios(
    ducode: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    """With three ratios the change column is 1 - X(o3) / X(o2), paired per seed, from the same
    runs as the cells."""
    ratios = [Fraction(1, 10), Fraction(1, 2), Fraction(9, 10)]
    authors = ducode.SETTINGS[3]
    ducode.sweep_table("eps", ["sin"], 1000, 60, 2, ratios, ["pbd"], [authors], [1])
    out = capsys.readouterr().out
    assert "| 1 - X(0.9)/X(0.5): mean [95% interval]" in out

    def amre(o: Fraction, seed: int) -> float:
        pop = ducode.budget_ratio_population(1000, o, seed)
        return float(ducode.run(pop, "sin", 60, seed, authors, "as is", "pbd", 1).amre)

    drop = [1 - amre(ratios[2], s) / amre(ratios[1], s) for s in (0, 1)]
    iv = ducode.interval(drop)
    want = f"{iv.mean:.1%} [{iv.low:.1%}, {iv.high:.1%}], {min(drop):.0%} .. {max(drop):.0%} |"
    row = next(x for x in out.splitlines() if x.startswith("| Sin | PBD authors, shuffled 1 |"))
    assert row.endswith(want)


def test_pwsm_ratio_ducode_shuffle_mechanisms_and_settings_on_the_command_line() -> None:
    out = output(
        "pwsm_ratio_ducode.py",
        *("--slots", "300", "--seeds", "1", "--datasets", "sin", "--sweeps", "eps"),
        *("--ratios", "0.7,0.9", "--no-check", "--mechanisms", "pba,pbd"),
        *("--settings", "authors", "--shuffle", "1,2"),
    )
    # in order: the authors' PBA row of the plain run (above), now named with its mechanism
    assert "| Sin | PBA authors | 4,443 [166] | 2,624 [266] | 40.9%, 41% .. 41% |" in out
    names = [
        f"{m} authors{o}" for m in ("PBA", "PBD") for o in ("", ", shuffled 1", ", shuffled 2")
    ]
    table_b = out.split("## (b)")[1].split("(b) eps:o took")[0]
    rows = [x.split(" | ")[1] for x in table_b.splitlines() if x.startswith("| Sin | ")]
    assert rows == names  # --settings authors: 2 mechanisms x 3 orders, no other setting
    for flag, value in (("--settings", "nope"), ("--mechanisms", "ba"), ("--shuffle", "x")):
        done = subprocess.run(
            [sys.executable, str(ANALYSIS / "pwsm_ratio_ducode.py"), flag, value],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 2 and f"{flag}:" in done.stderr


def test_pwsm_ratio_ducode_refuses_bad_ratios() -> None:
    done = subprocess.run(
        [sys.executable, str(ANALYSIS / "pwsm_ratio_ducode.py"), "--ratios", "1.5"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "--ratios: numbers between 0 and 1" in done.stderr


def test_pwsm_ratio_ducode_split_is_the_amre_of_each_part(
    ducode: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    """``split`` S: the AMRE over slots 1..S is the AMRE of the same run cut at S (the data and
    noise are drawn slot by slot), the two parts average to the whole, and table (f) pairs each
    part's change per seed as the change column does."""
    pop = ducode.window_ratio_population(1000, Fraction(9, 10), 0)
    for kind in ("lns", "sin"):
        whole = ducode.run(pop, kind, 100, 0, ducode.SETTINGS[0], split=40)
        head, tail = whole.split
        assert head == ducode.run(pop, kind, 40, 0, ducode.SETTINGS[0]).amre
        assert (40 * head + 60 * tail) / 100 == pytest.approx(whole.amre, rel=1e-12)
        assert head != tail
    assert ducode.run(pop, "sin", 100, 0, ducode.SETTINGS[0]).split is None
    with pytest.raises(ValueError, match=r"split must lie in 1\.\.99"):
        ducode.run(pop, "sin", 100, 0, ducode.SETTINGS[0], split=100)
    ratios = [Fraction(1, 2), Fraction(9, 10)]
    sound = ducode.SETTINGS[0]
    ducode.sweep_table("w", ["sin"], 1000, 60, 2, ratios, ["pba"], [sound], (), False, 20)
    out = capsys.readouterr().out
    assert "| data | setting | slots 1..20 | change | slots 21..60 | change |" in out
    runs = {
        o: [
            ducode.run(ducode.window_ratio_population(1000, o, s), "sin", 60, s, sound, split=20)
            for s in (0, 1)
        ]
        for o in ratios
    }
    cells = []
    for part in (0, 1):
        lo = [r.split[part] for r in runs[ratios[0]]]
        hi = [r.split[part] for r in runs[ratios[1]]]
        iv = ducode.interval([1 - a / b for a, b in zip(hi, lo, strict=True)])
        cells.append(f"{np.mean(lo):,.0f} -> {np.mean(hi):,.0f}")
        cells.append(f"{iv.mean:.1%} [{iv.low:.1%}, {iv.high:.1%}]")
    assert "| Sin | sound | " + " | ".join(cells) + " |" in out


def test_pwsm_ratio_ducode_refuses_a_split_outside_the_stream() -> None:
    for split in ("300", "-1"):
        done = subprocess.run(
            [
                sys.executable,
                str(ANALYSIS / "pwsm_ratio_ducode.py"),
                "--slots",
                "300",
                "--split",
                split,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 2 and "--split: a slot in 1..299" in done.stderr
        assert "Traceback" not in done.stderr


@pytest.mark.parametrize("w", [2, 3, 5])
def test_pwsm_absolute_bd_budgets_are_wevents_sound_and_du_code_kernels(w: int) -> None:
    """The simulator's BD against wevent's exact kernels on the simulator's own decisions: each
    published budget equals the sound kernel's (subtract the last w - 1 publications) and, with
    ``bd_last_w``, du-code's (the last w: the authors' DynamicWEventCode)."""
    from wevent.mechanisms.allocators import make_kernel, run_trace
    from wevent.mechanisms.allocators.algebra import ExactAlgebra
    from wevent.mechanisms.allocators.kernel import DU_CODE, FixedClass

    with analysis_module("pwsm_absolute") as pa:
        budgets = []
        for variant, last_w in (("sound", False), (DU_CODE, True)):
            setting = pa.Setting("test", bd_last_w=last_w)
            trace: list[tuple[float, bool]] = []
            pa.simulate("bd", "sin", 300, 120, 1.0, w, 0, setting, trace)
            decisions = [published for _, published in trace]
            assert 10 < sum(decisions) < 110  # both kinds of slot, runs of publications
            kernel = make_kernel("bd", ExactAlgebra(), [FixedClass(w, Fraction(1))], variant)
            steps = run_trace(kernel, decisions)
            for (eps_pub, published), step in zip(trace, steps, strict=True):
                if published:
                    assert eps_pub == pytest.approx(float(step.publication[0]), rel=1e-12)
            budgets.append([b for b, _ in trace])
        assert budgets[0] != budgets[1]


def test_pwsm_absolute_ordering_compares_bd_with_a_release_at_zero() -> None:
    out = output("pwsm_absolute.py", "--ordering", "--slots", "300", "--seeds", "1")
    # 001's TLNS BD row is the error of a release stuck at zero at E = 0.2; Sin and Log far below.
    assert "| TLNS | 1.013 | 0.775 | 0.631 | 0.553 | 0.557 | 0.298 |" in out
    assert "| Sin | 0.343 | 0.090 | 0.066 |" in out
    # wevent's GRR at E / w: the undebiased release errs by millions, the debiased by far more.
    assert "| Log | T5 E=0.2 | 9.3 | 3.27e+03 |" in out


def test_exsub_fanout_predicts_r4_best_under_our_levels() -> None:
    out = output("exsub_fanout.py", "--draws", "2000", "--T", "128")
    # 004 Lemma 1 per level, uniform portions: H sum_h u_h sigma_h^2 is largest at r = 2.
    assert "| 0.1 | 2 | 8 | 0.5 / 0.5 / 0.5 / 0.5 / 0.5 / 0.5 / 0.5 / 0.00781 |" in out
    assert "| 23526 | 188206 |" in out and "| 36286 | 145143 |" in out
    row = next(
        line
        for line in out.splitlines()
        if line.startswith("| T=128, tree=ours, W=uniform, sigma=level | 0.1 |")
    )
    assert "| 0.771 / 0.911 / 0.973 | 4 | no |" in row  # MSE ratios, best r, 004's order
    assert "| 0.1 | 1.13 / 1.19 / 1.22 / 1.31 | 1.053 / 1.080 / 1.159 |" in out
    # 004's level count: deterministic MSE ratios, and 004's r = 4 ratio far above the model's
    row004 = next(
        line
        for line in out.splitlines()
        if line.startswith("| T=128, tree=004, W=uniform, sigma=level | 0.1 |")
    )
    assert "| 0.964 / 1.215 / 1.460 |" in row004 and row004.rstrip(" |").split("| ")[-1][:2] == "+3"


def test_exsub_fanout_levels_and_nonzero_probability() -> None:
    with analysis_module("exsub_fanout") as fanout:
        pass
    # 004's H = ceil(log_r T) + 1 against ours (r^h <= T): equal only when T is a power of r.
    assert [fanout.tree_levels(128, r, "ours") for r in (2, 4, 8, 16)] == [8, 4, 3, 2]
    assert [fanout.tree_levels(128, r, "004") for r in (2, 4, 8, 16)] == [8, 5, 4, 3]
    assert [fanout.tree_levels(128, r, "004-0H") for r in (2, 4, 8, 16)] == [9, 6, 5, 4]
    assert fanout.tree_levels(256, 4, "004") == fanout.tree_levels(256, 4, "ours") == 5
    with pytest.raises(ValueError, match="unknown tree"):
        fanout.tree_levels(128, 2, "nope")
    # the per-entry variance averaged over entries is Lemma 1's value MSE over d' (the model's
    # one input from the mechanism), at a non-zero share of s / d'
    from fractions import Fraction

    from wevent.mechanisms.exsub import ExSubDesign

    for d_prime in (136, 40, 10):
        for eps in (Fraction(1, 10), Fraction(1)):
            want = float(ExSubDesign.for_budget(d_prime, 8, eps).value_mse())
            got = d_prime * fanout.entry_variance(d_prime, 8, eps, 8 / d_prime)
            assert got == pytest.approx(want, rel=1e-12)
    # a single cell is non-zero with probability s / T; the whole stream (even s) never is
    assert fanout.nonzero_probability(128, 8, 1) == pytest.approx(8 / 128)
    assert fanout.nonzero_probability(128, 8, 128) == 0.0
    assert fanout.nonzero_probability(128, 7, 128) == 1.0
    # Algorithm 2's matrix reconstructs x_t exactly from true residues (a broken term fails)
    x = (np.arange(1, 129) % 3 == 0).astype(float)
    for r in (2, 4, 8, 16):
        M, col = fanout.answer_matrix(128, r)
        res = []
        for h in sorted(set(col)):
            step = r**h
            picked = x[step - 1 :: step][: 128 // step]
            res.append(picked - np.concatenate([[0.0], picked[:-1]]))
        assert np.allclose(M @ np.concatenate(res), x)
        M[5, 2] += 1  # x_6 also adds the level-0 residue of slot 3 (= 1)
        assert not np.allclose(M @ np.concatenate(res), x)


def _exsub_runs(path: Path, header: list[str], sample_oue: tuple[float, float]) -> None:
    """A runs.csv of two repeats on one data set: every mechanism's MAE 1.0 and 2.0, sample-oue's
    the given pair (the earlier metrics, if in the header, are 0)."""
    lines = [",".join(header)]
    for mech in ("exsub", "exsub-calibrated", "sample-grr", "sample-oue", "split-rr"):
        for rep, mae in enumerate(sample_oue if mech == "sample-oue" else (1.0, 2.0)):
            values = {"mean_mae": str(mae), "range_mae": str(2 * mae)}
            row = {"experiment": "exsub", "dataset": "ds", "epsilon": "1", "mechanism": mech}
            row |= {"repeat": str(rep), **values}
            lines.append(",".join(row.get(col, "0") for col in header))
    path.write_text("\n".join(lines) + "\n")


def test_exsub_mae_pairs_each_repeat_with_its_baseline(tmp_path: Path) -> None:
    header = ["experiment", "dataset", "epsilon", "mechanism", "repeat", "mean_tve"]
    runs = tmp_path / "runs.csv"
    _exsub_runs(runs, [*header, "mean_mae", "range_mae"], (2.0, 8.0))
    out = output("exsub_mae.py", "--runs", str(runs))
    # 1 - 1/2 and 1 - 2/8: mean 62.5% (not 1 - 1.5/5 = 70%), t(0.975, 1) = 12.706
    assert "| ds | 1 | 1.5 | 5 | 62.5% [-96.3, 221.3] (undecided) |" in out
    assert "| range_mae | exsub-calibrated | sample-oue | 62.5% | 62.5% | -96.3% | 0 of 1 |" in out
    _exsub_runs(runs, [*header, "mean_mae", "range_mae"], (2.0, 2.5))
    assert "| ds | 1 | 1.5 | 2.25 | 35.0% [-155.6, 225.6] (undecided) |" in output(
        "exsub_mae.py", "--runs", str(runs)
    )
    _exsub_runs(runs, header, (2.0, 8.0))  # a runs.csv from before MAE: refused in one line
    for args in (["--runs", str(runs)], ["--runs", str(tmp_path / "none.csv")]):
        done = subprocess.run(
            [sys.executable, str(ANALYSIS / "exsub_mae.py"), *args],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert "Traceback" not in done.stderr


def test_exsub_mae_reads_the_committed_runs() -> None:
    """The MAE reductions docs/reproduction.md quotes, from the committed runs.csv."""
    out = output("exsub_mae.py")
    assert (
        "| synthetic-n20000-T32-d12-s8 | 1/2 | 1.687 | 4.304 | 60.4% [55.3, 65.5] (holds) |" in out
    )
    assert "| range_mae | exsub | sample-oue | 60.1% | 70.1% | 44.6% | 6 of 6 |" in out


@pytest.fixture
def table4() -> Iterator[ModuleType]:
    """analysis/exsub_table4.py as a module (it imports its sibling exsub_table2)."""
    with analysis_module("exsub_table4") as module:
        yield module


def test_exsub_table4_singles_out_512_counted_entries() -> None:
    out = output("exsub_table4.py")

    def row(start: str) -> str:
        return next(line for line in out.splitlines() if line.startswith(start))

    # 512 entries counted (stubs or not) fit both printed metrics at eps <= 1; the caption's
    # 1024, the 412 data entries of `exsub-tables`, the symbols and the halved L1 do not
    assert row("| 512-all | ExSub, authors' k |").endswith("| 126 | 3.7% | yes | 33.3% |")
    assert row("| 512-stubs | ExSub, authors' k |").endswith("| 3.7% | yes | 28.0% |")
    assert row("| 512-all | Collision |").endswith("| 4.4% | yes | 26.8% |")
    for start in ("| 1024-data | ExSub, authors' k |", "| 512-data | ExSub, authors' k |"):
        assert "| no |" in row(start)
    assert "| 45.0% | no |" in row("| 512-symbols | ExSub, authors' k |")
    assert "| 14.3% | no |" in row("| 1024-all-half | ExSub, authors' k |")
    assert "| exsub | 0.001 | 126.7 | 516 | 511-521 |" in out  # the count the ratio implies
    assert "ExSub's best pool P = 192 (0.38 of the entries), Collision's 220" in out
    assert "Table II's best ExSub pool P = 48 (0.38 of the entries)." in out
    # Table II counts 128 entries at 50,000 users; 64 (d' as symbols) fits neither n
    assert "| 128 | 50,000 | 0.99-1.01 | 0.97-1.06 | 0.97-1.01 | 1.00-1.02 |" in out
    assert "| 64 | 10,000 | 1.08-1.10 | 1.95-2.13 |" in out


def test_exsub_table4_model(table4: ModuleType) -> None:
    from wevent.mechanisms.exsub import ExSubDesign

    t2 = importlib.import_module("exsub_table2")
    # the maximum of K |N(0,1)| matches exsub_table2's (a wrong count does not)
    for k in (1, 128, 512):
        assert table4.expected_max([(k, 1.0)]) == pytest.approx(t2.expected_max_abs(k), rel=1e-4)
    assert table4.expected_max([(512, 1.0)]) != pytest.approx(t2.expected_max_abs(1024), rel=1e-2)
    # (|X| + |Y|) / 2 and max(|X|, |Y|) against Monte Carlo; Y -> 0 leaves |X| / 2
    rng = np.random.default_rng(0)
    x, y = rng.normal(0, 1.0, (20000, 64)), rng.normal(0, 0.5, (20000, 64))
    mc = ((np.abs(x) + np.abs(y)) / 2).max(axis=1).mean()
    assert table4.expected_max_half_sum([(64, 1.0, 0.5)]) == pytest.approx(mc, rel=0.01)
    assert table4.expected_max_half_sum([(64, 0.5, 1.0)]) == pytest.approx(mc, rel=0.01)
    assert table4.expected_max_half_sum([(64, 1.0, 1e-9)]) == pytest.approx(
        table4.expected_max([(64, 0.5)]), rel=1e-3
    )
    pair = np.maximum(np.abs(x[:, 0]), np.abs(y[:, 0])).mean()
    assert table4.expected_max_pair(1.0, 0.5) == pytest.approx(pair, rel=0.02)
    # with no stubs the predicted TVE is Lemma 1's value MSE spread over the d' entries
    eps = Fraction(1)
    m = table4.authors_k(512, 100, eps)
    var = table4.exsub_variances(512, 100, eps, m)
    mse = float(ExSubDesign(512, 100, m, table4.exclusion_weight(eps)).value_mse())
    tve, _ = table4.predict(table4.Reading("all", 512, 512, 512), var, 50_000)
    assert tve == pytest.approx(512 * np.sqrt(2 / np.pi) * np.sqrt(mse / 512 / 50_000), rel=1e-9)
    halved, _ = table4.predict(table4.Reading("h", 512, 512, 512, l1=0.5), var, 50_000)
    fewer, _ = table4.predict(table4.Reading("d", 512, 412, 412), var, 50_000)
    assert halved == pytest.approx(tve / 2) and fewer < 0.85 * tve
    # stubs counted: 412 data entries at a non-zero share of 100 / 412, 100 entries always 0
    stubs, _ = table4.predict(table4.Reading("s", 512, 412, 512), var, 50_000)
    q = 100 / 412
    data_sd = np.sqrt((q * var.nonzero + (1 - q) * var.zero) / 50_000)
    stub_sd = np.sqrt(var.zero / 50_000)
    assert stubs == pytest.approx(np.sqrt(2 / np.pi) * (412 * data_sd + 100 * stub_sd), rel=1e-9)
    # the printed rounding: 0.41 stands for [0.405, 0.415]
    assert table4.miss(0.414, "0.41") == 0.0
    assert table4.miss(0.42, "0.41") == pytest.approx(0.005 / 0.41)
    assert table4.miss(5.44e4, "5.4e4") == 0.0 and table4.miss(5.5e4, "5.4e4") > 0
    with pytest.raises(ValueError, match="need"):
        table4.Reading("bad", 512, 600, 512)


def test_exsub_table4_simulation_matches_the_model(table4: ModuleType) -> None:
    cell = table4.SimCell(table4.READINGS[6], table4.EXSUB_AUTH, Fraction(1))
    assert cell.reading.key == "512-all"
    runs = [table4.simulate_cell(cell, 4000, 0, rep) for rep in range(4)]
    var = table4.EXSUB_AUTH.variances(512, 100, Fraction(1))
    tve, _ = table4.predict(cell.reading, var, 4000)
    sym_tve, _ = table4.predict(table4.READINGS[7], var, 4000)
    assert np.mean([r["tve"] for r in runs]) == pytest.approx(tve, rel=0.05)
    assert np.mean([r["symbols-tve"] for r in runs]) == pytest.approx(sym_tve, rel=0.05)
    # the symbol reading is a different quantity (about 1.4 times the value TVE)
    assert np.mean([r["symbols-tve"] for r in runs]) > 1.3 * tve


def test_pegasus_grouping_doubles_the_error_of_the_benchmarks_path() -> None:
    out = output("pegasus_grouping.py", "--seeds", "2", "--users", "5000", "--slots", "60")
    rows = [line.split("|") for line in out.splitlines()[2:]]
    means = {(r[1].strip(), r[2].strip()): float(r[4]) for r in rows}
    for kind in ("lns", "sin", "log"):
        assert means[(kind, "grouping")] > means[(kind, "no grouping (registered)")]


def test_exsub_succinct_integer_storage_against_a_simulation() -> None:
    """The exact truncation figures of analysis/exsub_succinct.py against trunc(g_j v) drawn by
    our SUCCINCT sampler (Table II, s = 8, n = 50,000, eps = 3): the zero entries' sd ratio and
    the non-zero entries' mean within 5 standard errors of the rows' means, the sd ratio within
    0.01, and the effect itself (1 - 0.914, 0.829 - 0.735) larger than that."""
    from wevent.mechanisms import exsub_competitors as C

    with analysis_module("exsub_succinct") as succ:
        f = succ.figures(8, 128, 50_000, Fraction(3))
    assert f["sd_ratio"] < 0.93 and f["gain"] - f["gain_int"] > 0.05
    x = np.array([1, -1, 1, -1, 1, -1, 1, -1, 0, 0])
    rows = np.tile(x, (400_000, 1))
    g, v = C.succinct_reports(rows, 8, Fraction(3), np.random.default_rng(21), 50_000)
    real = g * v[:, None]
    stored = np.trunc(real)
    zero = x == 0
    ratio = math.sqrt(float((stored[:, zero] ** 2).mean() / (real[:, zero] ** 2).mean()))
    assert abs(ratio - f["sd_ratio"]) < 0.01
    for est, want in ((stored, f["gain_int"]), (real, f["gain"])):
        per_row = (est[:, ~zero] * x[~zero]).mean(axis=1)  # the rows are independent
        se = float(per_row.std()) / math.sqrt(len(per_row))
        assert abs(float(per_row.mean()) - want) < 5 * se


@pytest.fixture
def table4_high() -> Iterator[ModuleType]:
    """analysis/exsub_table4_high.py as a module (it imports exsub_table4 and exsub_table2)."""
    with analysis_module("exsub_table4_high") as module:
        yield module


def test_exsub_table4_high_rules_out_equal_errors_clip_and_stubs() -> None:
    out = output("exsub_table4_high.py", "--quick")
    # uniform data: the level moves with the output size (the 125.8 ratio follows from the
    # equal-variance model by construction; the --simulate run measures it)
    assert "| ExSub | k = 1 (authors' k) | 125.8 | 1.10 | 125.8 | 1.24 |" in out
    assert "| ExSub | k = 4 | 125.8 | 1.94 | 125.8 | 2.79 |" in out
    assert "| Collision | t x 1 | 125.8 | 1.02 | 125.8 | 1.18 |" in out
    # the authors' clip keeps the ratio and cuts the level
    assert "| 3 | 1 | 153.7 | 28.82 | 0.188 | 0.214 | 0.137 | 125.8 |" in out
    # stub filling: misses eps <= 1 by about what no stub does (IV 4.4-4.5%, II 5.5-5.9%) and
    # eps = 3, 5 by >= 11.4% (IV) and >= 18.1% (II); whole rows, so each miss is tied to its row
    assert (
        "| IV | r uniform on 0..s | 50.0 | exsub | 1.03 / 1.04 | 1.01 / 0.98 | 0.99 / 0.97 "
        "| 1.06 / 0.93 | 1.17 / 0.94 | 4.5% | 16.6% |" in out
    )
    assert (
        "| IV | r ~ Binomial(s, 1/2) | 50.0 | exsub | 1.03 / 1.04 | 1.01 / 0.98 | 0.99 / 0.98 "
        "| 1.04 / 1.03 | 1.12 / 1.04 | 4.5% | 11.4% |" in out
    )
    assert (
        "| IV | exactly s (no stub used) | 100.0 | exsub | 1.03 / 1.04 | 1.01 / 0.98 "
        "| 1.00 / 0.96 | 1.08 / 0.74 | 1.17 / 0.68 | 4.4% | 28.0% |" in out
    )
    assert (
        "| II | Bernoulli(s / data), capped at s | 6.9 | exsub | 0.99 / 0.97 | 1.01 / 1.05 "
        "| 0.99 / 1.06 | 1.01 / 0.92 | 1.12 / 0.86 | 5.6% | 18.1% |" in out
    )
    assert "| II | exactly s (no stub used) | 8.0 | collision |" in out
    misses = [
        float(line.split("|")[-2].strip("% ")) for line in out.splitlines() if "| exsub |" in line
    ]
    assert len(misses) == 10 and min(misses[:5]) == 11.4 and min(misses[5:]) == 18.1


def test_exsub_table4_high_model(table4_high: ModuleType) -> None:
    t4 = importlib.import_module("exsub_table4")
    # Collision at the authors' t is exsub_table2's model (a factor 2 is not)
    for eps in (Fraction(1), Fraction(5)):
        ours = table4_high.collision_variances_t(eps, Fraction(1))
        theirs = t4.collision_entry_variances(eps)
        assert (ours.zero, ours.nonzero) == pytest.approx((theirs.zero, theirs.nonzero))
        assert table4_high.collision_variances_t(eps, Fraction(2)).zero != pytest.approx(
            theirs.zero
        )
    # stub shares: every user has exactly s non-zero entries, data and stubs together
    pr = np.full(101, 1 / 101)
    shares = table4_high.stub_shares(512, 100, pr)
    assert sum(c * q for c, q in shares) == pytest.approx(100)
    assert shares[1][1] == pytest.approx(100 / 101) and shares[-1][1] == pytest.approx(1 / 101)
    exact = table4_high.stub_shares(512, 100, np.eye(101)[100])
    assert all(q == 0 for _, q in exact[1:])
    # the distinct-count recursion against a direct simulation
    rng = np.random.default_rng(0)
    draws = rng.integers(0, 412, size=(20000, 100))
    distinct = np.array([len(set(row)) for row in draws.tolist()])
    pmf = table4_high.distinct_pmf(412, 100)
    assert pmf.sum() == pytest.approx(1.0)
    assert float(np.dot(np.arange(101), pmf)) == pytest.approx(distinct.mean(), rel=2e-3)
    # equal shares give the equal-error ratio; uneven shares a lower one
    var = t4.exsub_variances(512, 100, Fraction(5), 1)
    tve, mae = table4_high.predict_shares([(512, 100 / 512)], var, 50_000)
    assert tve / mae == pytest.approx(t4.gaussian_ratio(512), rel=1e-6)
    tve2, mae2 = table4_high.predict_shares(shares, var, 50_000)
    assert tve2 / mae2 < 0.8 * tve / mae


def test_exsub_table4_high_stub_vectors_and_sampler(table4_high: ModuleType) -> None:
    rng = np.random.default_rng(1)
    R = table4_high.stub_vectors(3000, 512, 100, rng)
    assert ((R != 0).sum(axis=1) == 100).all()
    assert (R[:, 412:] >= 0).all()  # stubs are +1 or 0
    share = (R != 0).mean(axis=0)
    assert share[412] == pytest.approx(100 / 101, abs=0.02)
    assert share[:412].mean() == pytest.approx(50 / 412, rel=0.05)
    tve, _ = table4_high.measure("uniform", Fraction(5), 1, 4000, 0, 0)
    var = importlib.import_module("exsub_table4").exsub_variances(512, 100, Fraction(5), 1)
    pred, _ = table4_high.predict_shares([(512, 100 / 512)], var, 4000)
    assert tve == pytest.approx(pred, rel=0.08)


@pytest.fixture
def table4_generators() -> Iterator[ModuleType]:
    """analysis/exsub_table4_generators.py as a module (it imports exsub_table4)."""
    with analysis_module("exsub_table4_generators") as module:
        yield module


def _row_misses(out: str, start: str) -> tuple[float, float]:
    """(miss at eps <= 1, miss at eps = 3, 5) of the generator row starting with ``start``."""
    (line,) = [row for row in out.splitlines() if row.startswith(start)]
    cols = [c.strip() for c in line.split("|")]
    return float(cols[-4].rstrip("%")), float(cols[-3].rstrip("%"))


def test_exsub_table4_generators_no_unfitted_generator_fits_both_tables() -> None:
    out = output("exsub_table4_generators.py", "--quick")
    # exact shares (no draws): equal errors, and the same support for every user
    assert (
        "| IV | uniform | 0.20 | 1.03 / 1.04 | 1.01 / 0.98 | 1.00 / 0.96 | 1.10 / 0.70 "
        "| 1.24 / 0.62 | 125.8, 125.8 | 3.7% | 33.3% | 26.8% |" in out
    )
    assert "| II | uniform | 0.06 |" in out and "| 36.1, 36.1 | 5.5% | 22.0% |" in out
    assert _row_misses(out, "| IV | same support |") == (3.7, 20.8)
    assert _row_misses(out, "| II | same support |") == (6.5, 66.1)
    # every unfitted generator misses eps = 3, 5 of Table II by > 20%; Zipf a = 2 fits Table IV
    for gen in ("uniform", "with replacement", "stubs", "symbols mod L", "zipf a = 2"):
        assert _row_misses(out, f"| II | {gen} |")[1] > 20
    low, high = _row_misses(out, "| IV | zipf a = 2 |")
    assert low <= 3.7 and 2.5 <= high <= 3.5
    # the pool (exact) fitted on IV predicts II; Zipf's fitted a does not
    assert (
        "| pool | s of the first f L entries, uniformly | f = P / L | 0.375 | 5.4% | 1.7% | none "
        "| 1.7% |" in out
    )
    (zipf,) = [row for row in out.splitlines() if row.startswith("| zipf | successive")]
    assert float(zipf.split("|")[6].strip(" %")) > 35
    # the figures docs/reproduction.md quotes: stubs never used (exact shares), Zipf a = 4
    # (drawn: 9.5% / 55.9% with the full run's 20,000 draws)
    assert _row_misses(out, "| IV | stubs |") == (3.7, 28.0)
    assert 8.9 <= _row_misses(out, "| IV | zipf a = 4 |")[1] <= 10.1
    assert 54.5 <= _row_misses(out, "| II | zipf a = 4 |")[1] <= 57.5
    # the normal bump and the exponential decay fitted on IV (IV best, IV miss, II miss at it;
    # the full run: 0.0875, 2.3%, 3.7% and 0.125, 0.4%, 10.2%)
    assert _family_summary(out, "normal") == (0.0875, 2.3, 3.7)
    best, iv, ii = _family_summary(out, "exponential")
    assert best == 0.125 and iv <= 1.0 and 9.5 <= ii <= 11.0
    # the pool carried by the other rule (s / P kept) misses; the pools Table II accepts
    assert "Table II P = 15.36; miss at eps = 3, 5: P = 15: 39.8%, P = 16: 37.2%." in out
    assert "Table II pools within 5%: P = 40-64 of 128 (0.31-0.50; 25 values), worst 4.7%." in out


def _family_summary(out: str, family: str) -> tuple[float, float, float]:
    """(IV best parameter, IV miss at eps = 3, 5, II miss at it) of a family's summary row."""
    (row,) = [r for r in out.splitlines() if r.startswith(f"| {family} | ") and "successive" in r]
    cols = [c.strip(" %") for c in row.split("|")]
    return float(cols[4]), float(cols[5]), float(cols[6])


def test_exsub_table4_generators_quick_simulate_honours_users_and_repeats() -> None:
    out = output(
        "exsub_table4_generators.py", "--quick", "--simulate", "--users", "200", "--repeats", "3"
    )
    assert "### Measured with our sampler, n = 200, 3 repeats, seed 0;" in out


def test_exsub_table4_generators_model(table4_generators: ModuleType) -> None:
    g = table4_generators
    # successive sampling against its exact inclusion probabilities (L = 4, s = 2)
    w = np.array([1.0, 2.0, 3.0, 4.0])
    exact = np.zeros(4)
    for i in range(4):
        for j in range(4):
            if i != j:
                p = w[i] / w.sum() * w[j] / (w.sum() - w[i])
                exact[[i, j]] += p
    est = g.successive_shares(w, 2, 40_000, 0)
    assert est.sum() == pytest.approx(2.0)
    assert est == pytest.approx(exact, abs=0.012)
    # relabelling the entries relabels the shares (uniform weights: equal shares)
    uni = g.successive_shares(np.ones(64), 8, 20_000, 1)
    assert uni == pytest.approx(np.full(64, 8 / 64), abs=0.01)
    # the authors' symbol layout: L - s entries with two symbols in range
    assert list(g.symbol_weights(6, 2)) == [2.0, 2.0, 2.0, 2.0, 1.0, 1.0]
    # grouping the entries for the expected maximum changes it by < 1%
    t4 = importlib.import_module("exsub_table4")
    sds = np.sqrt(np.linspace(1.0, 40.0, 200))
    full = t4.expected_max([(1.0, float(v)) for v in sds])
    assert t4.expected_max(g.grouped(sds)) == pytest.approx(full, rel=0.01)
    # concentrated shares lower TVE / MAE below the equal-error ratio
    q = g.successive_shares(g.zipf_weights(512, 2.0), 100, 4000, 0)
    tve, mae = g.predict(q, t4.EXSUB_AUTH, g.IV, Fraction(5), 50_000)
    assert tve / mae < 0.6 * t4.gaussian_ratio(512)


def test_exsub_table4_generators_sampler(table4_generators: ModuleType) -> None:
    g = table4_generators
    rng = np.random.default_rng(2)
    w = g.zipf_weights(512, 2.0)
    R = g.sample(w, 100, 3000, rng)
    assert ((R != 0).sum(axis=1) == 100).all() and set(np.unique(R)) == {-1, 0, 1}
    q = g.successive_shares(w, 100, 4000, 3)
    assert (R != 0).mean(axis=0) == pytest.approx(q, abs=0.05)
    tve, _ = g.measure(g.weighted_draw(w, 100), g.IV, Fraction(5), 4000, 0, 0)
    pred, _ = g.predict(
        q, importlib.import_module("exsub_table4").EXSUB_AUTH, g.IV, Fraction(5), 4000
    )
    assert tve == pytest.approx(pred, rel=0.1)
    # a support reused across the slots: every user's s entries in ceil(s / T) dimensions,
    # every entry the same share
    for table, width in ((g.IV, 4), (g.II, 1)):
        R = g.reused_support_draw(table)(4000, rng)
        assert ((R != 0).sum(axis=1) == table.s).all()
        dims = (R != 0).reshape(4000, -1, g.SLOTS).any(axis=2).sum(axis=1)
        assert (dims <= width).all()
        share = (R != 0).mean(axis=0)
        assert share == pytest.approx(np.full(table.entries, table.s / table.entries), abs=0.03)


@pytest.fixture
def window_obs() -> Iterator[ModuleType]:
    with analysis_module("pwsm_window_obs") as module:
        yield module


def test_pwsm_window_obs_finds_no_switch_at_ten_thousand_users() -> None:
    out = output("pwsm_window_obs.py", "--quick")
    assert (
        "| 001 Sec. 6.5, window sweep | (120, 0.6) / (40, 0.6) | 798 | 798 (1) | none "
        "| 2,661-7,980 |" in out
    )
    assert "| 001 Sec. 6.5, budget sweep | (120, 0.6) / (120, 1) | 1,129 | 1,129 (1) | 0.9 |" in out
    assert "| 001 Sec. 6.2, windows, E = 0.5 | (20, 0.5) / (10, 0.5) | 194 |" in out
    assert "I = 1.3 to 3.7 in steps of 0.1" in out
    assert "| 0.9 | 1,000 | 1 | the lowest budget at every t_A |" in out
    assert "| yes |" in out and "| NO |" not in out


def test_pwsm_window_obs_identical_check_can_say_no() -> None:
    # negative control of the `identical` column: at 5,000 users OBS switches at o = 0.9
    out = output("pwsm_window_obs.py", "--quick", "--users", "5000")
    assert "| Sin | 0 | 14,424.6 [38] | 14,424.6 [38] | 26,416.0 [53] | NO |" in out


def test_pwsm_window_obs_what_if_resets_the_cache() -> None:
    # I = 2 must not reuse SM plans cached under I = 1 (sensitivity() clears the cache on entry
    # and exit): without the reset, the I = 2 row repeats the I = 1 row
    out = output("pwsm_window_obs.py", "--quick", "--simulate")
    assert "| Sin | 1 | 11,307 [39] | 11,307 [39] | 0.0% |" in out
    assert "| Sin | 2 | 10,998 [25] | 21,132 [46] | -92.1% |" in out


def test_pwsm_window_obs_switch_point(window_obs: ModuleType) -> None:
    from wevent.accounting.budget import Budget
    from wevent.mechanisms.sampling import obs

    lo, hi = Fraction(3, 5) / 240, Fraction(3, 5) / 80
    n = window_obs.switch_point(lo, hi)
    assert n == 798
    assert obs({Budget(lo): n, Budget(hi): 1})[0] == Budget(hi)
    assert obs({Budget(lo): n + 1, Budget(hi): 1})[0] == Budget(lo)
    # the what-if weighting moves the point and is undone on exit
    with window_obs.sensitivity(Fraction(2)):
        assert window_obs.switch_point(lo, hi) == 1597
    assert window_obs.switch_point(lo, hi) == 798
    assert window_obs.n_range(798) == "2,661-7,980" and window_obs.n_range(0) == "none"


@pytest.fixture
def tlns_java() -> Iterator[ModuleType]:
    with analysis_module("pwsm_tlns_java") as module:
        yield module


JAVA_FIXTURE = Path(__file__).resolve().parent / "data" / "java_random_tlns.txt"


def test_pwsm_tlns_java_matches_java_17(tlns_java: ModuleType) -> None:
    """Against tests/data/java_random_tlns.txt, printed by Java 17's java.util.Random (its
    generator, tests/data/JavaRandomTlns.java, says how): the first 100 nextGaussian values of
    Random(1) and Random(42) to 2 ulp (Java's StrictMath.log is fdlibm, math.log is not: they
    differ in the last bit for some arguments, Random(42)'s first value among them), the
    rounded walk exactly at 494 slots (1-300, then every 50th), and its clipped slots."""
    gauss: dict[int, list[float]] = {1: [], 42: []}
    walk: dict[int, float] = {}
    clips: list[int] = []
    for line in JAVA_FIXTURE.read_text().splitlines():
        kind, *rest = line.split()
        if kind == "gauss":
            gauss[int(rest[0])].append(float.fromhex(rest[2]))
        elif kind == "walk":
            walk[int(rest[0])] = float.fromhex(rest[1])
        elif kind == "clip":
            assert rest[1] == "below"
            clips.append(int(rest[0]))
        else:
            assert (kind, rest) == ("clips", ["8", "0"])
    assert len(gauss[1]) == len(gauss[42]) == 100 and len(walk) == 494 and len(clips) == 8
    ulps = []
    for seed, want in gauss.items():
        rng = tlns_java.JavaRandom(seed)
        for j in want:
            ulps.append(abs(rng.next_gaussian() - j) / math.ulp(j))
    # An explicit tolerance: math.log may return a value 1 ulp from StrictMath.log, so the
    # multiplier sqrt(-2 log s / s) may be 1 ulp off, and v1 times it up to 2 ulp (one value of
    # these 200, Random(1)'s 29th); 190 of the 200 are equal to the bit.
    assert max(ulps) <= 2.0 and sum(u == 0.0 for u in ulps) >= 190
    assert ulps[100] == 1.0  # Random(42)'s first value: 1.141905315473055, Java 1.1419053154730547
    w = tlns_java.walk("rounded")
    assert all(float(w.p[t - 1]) == p for t, p in walk.items())
    assert (w.below, w.above) == (8, 0)
    assert all(float(w.p[t - 1]) == 0.0 for t in clips)
    with pytest.raises(ValueError, match="unknown walk variant 'nearest'"):
        tlns_java.walk("nearest")


def test_pwsm_tlns_java_regenerates_001s_walk(tlns_java: ModuleType) -> None:
    # java.util.Random's published value
    assert tlns_java.JavaRandom(1).next_int() == -1155869325
    rng = tlns_java.JavaRandom(7)
    g = [rng.next_gaussian() for _ in range(20000)]
    assert abs(float(np.mean(g))) < 0.03 and float(np.std(g)) == pytest.approx(1.0, abs=0.02)
    # 001 Section 6.1: 8 clipping events in 10,000 slots, all below 0, for one variant only
    counts = {v: (w.below, w.above) for v in tlns_java.VARIANTS for w in [tlns_java.walk(v)]}
    assert counts["rounded"] == (8, 0)
    assert all(c != (8, 0) for v, c in counts.items() if v != "rounded")
    # 001's TLNS PLBU rows are the error of a release stuck at (N/2, N/2) on that walk
    p = tlns_java.walk("rounded").p
    pred = tlns_java.uniform_error(p, 10_000)
    assert 0.985 < 9_629_126.83 / pred < 9_750_998.15 / pred < 1.0
    assert tlns_java.uniform_error(tlns_java.walk("rounded-0.5").p, 10_000) < 0.3 * pred


def test_pwsm_tlns_java_quick_output() -> None:
    out = output("pwsm_tlns_java.py", "--quick")
    assert "| rounded | 0.05 | 8 | 0 | 0.000 | 0.440 | 0.2232 |" in out
    assert "Table 5 0.9917-0.9981, Table 6 0.9856-0.9971" in out
    assert (
        "| T5 E=0.6 | 9.72 | 0.11 | 0.0343 | 0.757 | 0.00291 | 0.819 | 9.72 | 21.9 | 0.00523 "
        "| 1.0005 | 0.03 | 0.04 | 0 of 2 | 0 of 2 | 0 of 2 |" in out
    )
    assert "Random(42).nextGaussian() = 1.141905315473055, Java's 1.1419053154730547: 1 ulp" in out


def test_pwsm_tlns_java_shuffled_slots(
    tlns_java: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    """--shuffle: the same walk, its slots permuted (as the authors' runner reads its files);
    on it the simulator's S5 BD comes to 001's printed TLNS BD and above the undebiased PLBU,
    where on the walk in order it stays far below both (the quick-output test's row)."""
    w = tlns_java.walk("rounded")
    s = tlns_java.shuffled(w, 1)
    assert sorted(s.p.tolist()) == sorted(w.p.tolist()) and not np.array_equal(s.p, w.p)
    assert np.array_equal(tlns_java.shuffled(w, 1).p, s.p)
    assert not np.array_equal(tlns_java.shuffled(w, 2).p, s.p)
    tlns_java.ordering(s, 1, ("T5 E=0.6",))
    row = next(
        line for line in capsys.readouterr().out.splitlines() if line.startswith("| T5 E=0.6 |")
    )
    cells = [c.strip() for c in row.split("|")]
    plbu, bd5, printed_bd = float(cells[2]), float(cells[5]), float(cells[9])
    assert bd5 > plbu and 0.5 < bd5 / printed_bd < 2.0


def test_pwsm_tlns_java_shuffle_through_the_command_line() -> None:
    """`--quick --shuffle 1` as a user runs it: (c) on the shuffled walk, where S5's BD is above
    the undebiased PLBU at E = 0.6 (on the walk in order, `--quick` alone, it is 0.757 million,
    0 of 2 seeds: the quick-output test's row)."""
    out = output("pwsm_tlns_java.py", "--quick", "--shuffle", "1")
    assert "### (c) TLNS on the `rounded, slots shuffled (seed 1)` walk" in out
    assert (
        "| T5 E=0.6 | 9.73 | 4.57 | 0.987 | 16.1 | 0.00547 | 14.5 | 9.72 | 21.9 | 0.00523 "
        "| 1.0007 | 0.74 | 0.66 | 2 of 2 | 2 of 2 | 0 of 2 |" in out
    )


def test_ducode_java_summary_prints_the_docs_figures() -> None:
    """analysis/ducode_java/summarize.py on the committed raw outputs of the authors' Java code:
    the figures docs/reproduction.md quotes from them."""
    out = output("ducode_java/summarize.py")
    assert (
        "| w = 40 | 10.3 | 9.95 [8.3-12.1] | 10.1 | 0.0476 | 0.059 | 388 | 436 | 708 | 9.63 " in out
    )
    assert (
        "as listed: BD median / printed BD 0.81-1.10; BD mean / printed BD 0.80-1.40; BA mean / "
        "printed BA 0.92-1.13; runs with BD > printed PLBU 85 of 90; BD mean > printed PLBU in "
        "9 of 9 cells" in out
    )
    assert "sorted: BD median / printed BD 0.00-0.27;" in out
    assert "runs with BD > printed PLBU 3 of 90;" in out
    assert (
        "BD median / printed 0.74-1.31; BD mean / printed 0.82-3.07; BA mean / printed 0.92-1.19"
        in out
    )
    assert "spans 4,303 on average (segments' spans 4,165-4,455)" in out
    assert "spans 550 on average (segments' spans 235-831)" in out
    assert "a release stuck at zero: AMRE 34,770,445.80" in out  # = the full runs' own figure
    assert "as listed, BD median / that: 0.29-1.10" in out
    assert "rounded walk: 9999 of 9999 steps equal" in out
    assert "394 slot files where p_t = 0, with ones in 0 of them" in out
    assert "publications 947-4,030 of 10,000 slots; noise part 9.22-35.2 million" in out
    assert "44 of 45 seed-cells (w = 40: 4 of 5)" in out
    assert "TLNS, Sin and Log as listed (27 cells): BD median / printed 0.43-1.34; BA mean" in out
    assert "as listed / sorted, publications per cell (E, w): 0.2, 120: 1.12;" in out


def test_pwsm_absolute_shuffle_is_one_permutation_and_moves_bd_ba(
    tlns_java: ModuleType,
) -> None:
    """`slot_order` (the authors' runner's file order) is a seeded permutation, the one
    `pwsm_tlns_java.shuffled` uses; on Sin it raises the simulator's S5 BA about threefold (the
    consecutive slots then differ by hundreds of users), and PLBU, whose error is per slot,
    does not move."""
    with analysis_module("pwsm_absolute") as pa:
        order = pa.slot_order(2000, 1)
        assert sorted(order.tolist()) == list(range(2000))
        assert not np.array_equal(order, np.arange(2000))
        assert np.array_equal(pa.slot_order(2000, 1), order)
        assert not np.array_equal(pa.slot_order(2000, 2), order)
        w = tlns_java.walk("rounded")
        assert np.array_equal(tlns_java.shuffled(w, 3).p, w.p[pa.slot_order(len(w.p), 3)])
        ones = pa.stream_ones("sin", 10_000, 2000, 0, True)
        mixed = pa.stream_ones("sin", 10_000, 2000, 0, True, 1)
        # the shuffled stream is another order of about the same counts (the users are drawn
        # again per slot, so only the mean is compared)
        assert not np.array_equal(mixed, ones)
        assert abs(float(np.mean(mixed)) - float(np.mean(ones))) < 5
        assert np.abs(np.diff(mixed)).mean() > 5 * np.abs(np.diff(ones)).mean()
        s5 = pa.SETTINGS[5]
        ba = [pa.simulate("ba", "sin", 10_000, 2000, 0.6, 120, 0, s5, None, k) for k in (None, 1)]
        assert ba[1] > 2.0 * ba[0]
        plbu = [
            pa.plbu_undebiased(
                pa.stream_ones("sin", 10_000, 500, 0, True, k).tolist(), 10_000, 0.6, 120, 0
            )
            for k in (None, 1)
        ]
        assert plbu[1] == pytest.approx(plbu[0], rel=0.05)


def test_pwsm_absolute_shuffled_grid_and_personal_runs() -> None:
    out = output(
        "pwsm_absolute.py",
        "--slots", "300", "--seeds", "1", "--no-check", "--settings", "5",
        "--datasets", "log", "--shuffle", "1", "--plbu", "--tlns", "java",
    )  # fmt: skip
    assert "## Log, slots in order:" in out and "## Log, slots shuffled (seed 1):" in out
    assert "TLNS: 001's walk (Java Random(1))" in out
    assert out.count("| S5 S3 + restart every 250 slots |") == 2
    done = subprocess.run(
        [sys.executable, str(ANALYSIS / "pwsm_absolute.py"), "--personal"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and "--personal needs --shuffle SEED" in done.stderr
    with analysis_module("pwsm_absolute") as pa:
        runs = [pa.personal_run("pba", "sin", 1000, 250, 0.6, 120, 0, k) for k in (None, 1)]
        # the same users and generators; only the order of the slots differs
        assert runs[0] != runs[1] and all(r[0] > 0 and 0 < r[1] <= 250 for r in runs)


def test_pwsm_absolute_personal_runs_restart_du_code_kernels(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`personal_run` builds the du-code kernel (the authors' rules) afresh every 250 slots:
    the kernels it asks for are counted, and the run changes when the restart is removed."""
    import dataclasses

    from wevent.mechanisms.allocators import registry

    asked: list[str] = []
    real = registry.kernel_for

    def spy(*args: Any) -> Any:
        asked.append(args[-1])
        return real(*args)

    monkeypatch.setattr(registry, "kernel_for", spy)
    with analysis_module("pwsm_absolute") as pa:
        restarted = pa.personal_run("pba", "sin", 400, 600, 0.6, 120, 0, None)
        assert asked == ["du-code"] * 3  # slots 1-250, 251-500, 501-600
        once = dataclasses.replace(pa.SETTINGS[5], segment=600)
        monkeypatch.setattr(pa, "SETTINGS", (*pa.SETTINGS[:5], once, *pa.SETTINGS[6:]))
        assert pa.personal_run("pba", "sin", 400, 600, 0.6, 120, 0, None) != restarted
        assert asked[3:] == ["du-code"]
