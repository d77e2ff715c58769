"""The registry of reproducible experiments: name -> function(out_dir, repeats, quick, seed).

An experiment writes its outputs (at least ``results.csv`` in the long form of
`wevent.experiments.harness.RESULT_COLUMNS`) into ``out_dir`` and returns the paths it wrote. Further
experiments plug in with `register`, as ExSub's does at the end of this module. ``all`` runs
every registered experiment, each into its own subdirectory (``--users``/``--slots`` only for
experiments registered with ``sized=``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Protocol

from wevent.accounting.budget import BudgetError
from wevent.experiments.harness import Size, plots_wanted
from wevent.experiments.papers import SWEEPS, cfpu_experiment, roc_experiment, sweep_experiment
from wevent.experiments.running_time import TIME_SWEEP, running_time_experiment

__all__ = [
    "ALL",
    "EXPERIMENTS",
    "Experiment",
    "ExperimentFn",
    "check_size_overrides",
    "register",
    "run_experiment",
]

ALL = "all"

ExperimentFn = Callable[[Path, int, bool, int], Sequence[Path]]


class SizedFn(Protocol):
    def __call__(
        self, out_dir: Path, repeats: int, quick: bool, seed: int, *, size: Size | None = None
    ) -> Sequence[Path]: ...


@dataclass(frozen=True)
class Experiment:
    """A registered experiment; ``sized`` ones also take ``size=`` (users and slots)."""

    name: str
    run: ExperimentFn
    summary: str
    full_users: int | None = None
    full_slots: int | None = None
    sized: SizedFn | None = None


EXPERIMENTS: dict[str, Experiment] = {}


def register(experiment: Experiment) -> None:
    """Add an experiment; names are unique and ``all`` is reserved."""
    if experiment.name == ALL or experiment.name in EXPERIMENTS:
        raise ValueError(f"experiment name {experiment.name!r} is taken")
    EXPERIMENTS[experiment.name] = experiment


def _register_papers() -> None:
    for name, sweep in SWEEPS.items():
        sized = partial(sweep_experiment, name)
        register(
            Experiment(name, sized, sweep.title, sweep.full.users, sweep.full.slots, sized=sized)
        )
    for other, fn, summary, full in (
        (
            "pwsm-time",
            running_time_experiment,
            TIME_SWEEP.title,
            (TIME_SWEEP.full.users, TIME_SWEEP.full.slots),
        ),
        ("cfpu", cfpu_experiment, "002 Table 2: communication frequency per user", (200_000, 800)),
        (
            "roc",
            roc_experiment,
            "002 Figure 7: event-monitoring ROC (eps = 1, w = 50)",
            (200_000, 800),
        ),
    ):
        register(Experiment(other, fn, summary, full[0], full[1], sized=fn))


def _exsub(out_dir: Path, repeats: int, quick: bool, seed: int) -> list[Path]:
    """004 Section VI: ExSub against the baselines (`wevent.experiments.exsub_experiment`)."""
    from wevent.experiments.exsub_experiment import run_exsub_experiment

    run_exsub_experiment(out_dir, repeats, quick, seed)
    names = ("results.csv", "runs.csv", "table.md", "exsub.png")
    return [out_dir / name for name in names if plots_wanted() or not name.endswith(".png")]


def _exsub_tables(out_dir: Path, repeats: int, quick: bool, seed: int) -> list[Path]:
    """004 Tables II-IV with our ExSub (`wevent.experiments.exsub_tables`)."""
    from wevent.experiments.exsub_tables import run_exsub_tables

    return run_exsub_tables(out_dir, repeats, quick, seed)


_register_papers()
register(
    Experiment(
        "exsub",
        _exsub,
        "004 Section VI: ExSub against sample-grr, sample-oue and split-rr (mean, range MSE)",
    )
)
register(
    Experiment(
        "exsub-tables",
        _exsub_tables,
        "004 Tables II-IV: TVE and MAE of ExSub and the offline competitors at extreme budgets "
        "and sparsity, ExSub's MAE by fan-out",
    )
)


def check_size_overrides(name: str, users: int | None, slots: int | None) -> None:
    """Refuse ``--users``/``--slots`` for an experiment (or, for ``all``, any experiment) that
    cannot take them: before anything runs, fingerprints included."""
    if users is None and slots is None:
        return
    if name == ALL:
        unsized = [e.name for e in EXPERIMENTS.values() if e.sized is None]
        if unsized:
            raise BudgetError(
                f"--users/--slots do not apply to {', '.join(unsized)}; run the others one by one"
            )
    elif name in EXPERIMENTS and EXPERIMENTS[name].sized is None:
        raise BudgetError(f"{name} does not take --users/--slots")


def run_experiment(
    name: str,
    out_dir: Path,
    repeats: int,
    quick: bool,
    seed: int,
    *,
    users: int | None = None,
    slots: int | None = None,
) -> list[Path]:
    """Run ``name`` (or every experiment for ``all``, each into ``out_dir/NAME``).

    ``users``/``slots`` override the size (full or quick) of the experiments that support it."""
    check_size_overrides(name, users, slots)
    if name == ALL:
        out: list[Path] = []
        for each in list(EXPERIMENTS):
            out.extend(
                run_experiment(each, out_dir / each, repeats, quick, seed, users=users, slots=slots)
            )
        return out
    if name not in EXPERIMENTS:
        raise BudgetError(
            f"unknown experiment {name!r} (expected one of {', '.join([*EXPERIMENTS, ALL])})"
        )
    exp = EXPERIMENTS[name]
    out_dir.mkdir(parents=True, exist_ok=True)
    if (users is None and slots is None) or exp.sized is None:  # (checked above)
        return list(exp.run(out_dir, repeats, quick, seed))
    base = _base_size(name, quick)
    size = Size(users or base.users, slots or base.slots, base.points, base.datasets)
    return list(exp.sized(out_dir, repeats, quick, seed, size=size))


def _base_size(name: str, quick: bool) -> Size:
    from wevent.experiments.papers import CFPU_SWEEP, ROC_SWEEP

    sweep = (
        SWEEPS.get(name) or {"cfpu": CFPU_SWEEP, "roc": ROC_SWEEP, "pwsm-time": TIME_SWEEP}[name]
    )
    return sweep.quick if quick else sweep.full
