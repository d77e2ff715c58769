"""streamdp-benchmark's "baseline supremacy", decided per cell on paired per-seed runs
(`wevent.experiments.supremacy`), and the sweep that produces its runs."""

from __future__ import annotations

import csv
from collections.abc import Mapping
from pathlib import Path

import pytest

from wevent.experiments import claims, metrics, supremacy
from wevent.experiments.harness import RUN_COLUMNS
from wevent.experiments.papers import BASELINES, STREAMDP, SWEEPS
from wevent.experiments.stats import FAILS, HOLDS, INCONCLUSIVE

# seed -> (dataset, setting) -> mechanism -> error
Values = Mapping[int, Mapping[tuple[str, str], Mapping[str, float]]]


def _write(root: Path, values: Values) -> Path:
    out = root / supremacy.EXPERIMENT
    out.mkdir(parents=True)
    with (out / "runs.csv").open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow([*RUN_COLUMNS, "mean-ae"])
        for seed, cells in values.items():
            for (dataset, setting), by_mech in cells.items():
                for mech, value in by_mech.items():
                    run = {c: "0" for c in RUN_COLUMNS}
                    run.update(
                        experiment=supremacy.EXPERIMENT,
                        dataset=dataset,
                        mechanism=mech,
                        epsilon="1",
                        w="10",
                        setting=setting,
                        seed=str(seed),
                        guard="accepted",
                    )
                    writer.writerow([*(run[c] for c in RUN_COLUMNS), repr(value)])
    return root


def _rows(lines: list[str]) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:] if line]


def test_verdicts_follow_the_paired_interval(tmp_path: Path) -> None:
    seeds: dict[int, dict[tuple[str, str], dict[str, float]]] = {}
    for s in range(5):
        jitter = 0.01 * s
        seeds[s] = {
            # the baseline clearly lower than every other mechanism
            ("lns", "eps=1"): {"uniform": 1.0 + jitter, "sample": 3.0, "bd": 2.0, "ba": 2.5},
            # the best other mechanism clearly lower
            ("sin", "eps=1"): {"uniform": 4.0, "sample": 5.0 + jitter, "bd": 2.0, "ba": 3.0},
            # alternating: undecided
            ("log", "eps=1"): {"uniform": 1.0 if s % 2 else 3.0, "sample": 9.0, "bd": 2.0},
        }
    lines = supremacy.evaluate(_write(tmp_path, seeds))
    rows = _rows(lines[:-2])
    assert [r[0] for r in rows] == ["TLNS", "Sin", "Log"]
    assert rows[0][2:5] == ["uniform", "bd", "1 (4)"] and rows[0][-1] == HOLDS
    assert rows[1][2:5] == ["uniform", "bd", "3 (4)"] and rows[1][-1] == FAILS
    assert rows[2][-1] == INCONCLUSIVE
    assert lines[-1].endswith("holds in 1, does not hold in 1, inconclusive in 1 of 3 cells.")


def test_the_groups_are_fixed_across_seeds(tmp_path: Path) -> None:
    """The better baseline and the best other are chosen once, by their means: a per-seed
    minimum over the others would favour the larger group by its noise alone."""
    seeds = {
        0: {("lns", "w=40"): {"uniform": 2.0, "sample": 2.0, "bd": 1.0, "ba": 3.0}},
        1: {("lns", "w=40"): {"uniform": 2.0, "sample": 2.0, "bd": 3.0, "ba": 1.0}},
    }
    rows = _rows(supremacy.evaluate(_write(tmp_path, seeds))[:-2])
    # bd and ba both average 2.0; the tie goes to the name that sorts first, for every seed
    assert rows[0][3] == "ba"
    cell = supremacy.cells(claims.load(tmp_path / supremacy.EXPERIMENT / "runs.csv"))[0]
    assert cell.reductions == pytest.approx([1 - 2.0 / 3.0, 1 - 2.0 / 1.0])


def test_every_other_mechanism_must_be_decidedly_above(tmp_path: Path) -> None:
    """The best other by mean is decided above the baseline, a second one is not: inconclusive
    (holding against the best by mean is not holding against every mechanism)."""
    seeds = {
        s: {
            ("lns", "eps=1"): {
                "uniform": 1.0,
                "sample": 5.0,
                "bd": 3.0 + 0.01 * s,
                "ba": (0.5, 9.0, 0.6, 9.0, 0.7)[s],
            }
        }
        for s in range(5)
    }
    lines = supremacy.evaluate(_write(tmp_path, seeds))
    row = _rows(lines[:-2])[0]
    assert row[3] == "bd" and row[6] == "1 of 2" and row[-1] == INCONCLUSIVE


def test_a_mechanism_missing_a_seed_is_named_not_dropped(tmp_path: Path) -> None:
    seeds: dict[int, dict[tuple[str, str], dict[str, float]]] = {
        s: {("lns", "eps=1"): {"uniform": 2.0 + 0.01 * s, "sample": 9.0, "ba": 4.0}}
        for s in range(5)
    }
    for s in range(4):  # bd, far below the baseline, has no run in seed 4
        seeds[s][("lns", "eps=1")]["bd"] = 0.5
    row = _rows(supremacy.evaluate(_write(tmp_path, seeds))[:-2])[0]
    assert row[-1] == f"{INCONCLUSIVE} (bd: not every seed)"
    seeds[4][("lns", "eps=1")]["bd"] = float("nan")
    other = tmp_path / "nan"
    row = _rows(supremacy.evaluate(_write(other, seeds))[:-2])[0]
    assert row[-1] == f"{INCONCLUSIVE} (bd: not every seed)"


def test_nothing_without_the_experiment(tmp_path: Path) -> None:
    assert supremacy.evaluate(tmp_path) == []


def test_the_sweep() -> None:
    sweep = SWEEPS[supremacy.EXPERIMENT]
    assert set(BASELINES) <= set(sweep.mechanisms) == set(STREAMDP)
    assert supremacy.METRIC in sweep.metrics
    eps = [p for p in sweep.points if p.setting.startswith("eps=")]
    ws = [p for p in sweep.points if p.setting.startswith("w=")]
    assert [float(p.epsilon) for p in eps] == [0.1, 0.3, 0.5, 0.7, 0.9, 1.0]
    assert {p.w for p in eps} == {120} and {p.epsilon for p in ws} == {1}
    assert [p.w for p in ws] == [40, 80, 120, 160, 200]


def test_mean_abs_error() -> None:
    assert metrics.mean_abs_error([[1.0, 5.0], [0.0, 0.0]], [[2, 3], [0, 4]]) == pytest.approx(
        (1 + 2 + 0 + 4) / 4
    )
