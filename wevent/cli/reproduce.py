"""`wevent reproduce`: one of the papers' experiments on the synthetic streams."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from click.core import ParameterSource

from wevent._extras import require
from wevent.cli._common import EXIT_VIOLATION, did_you_mean, fail
from wevent.errors import InputError

__all__ = ["reproduce_cmd"]


def _experiment_list() -> str:
    from wevent.experiments.registry import ALL, EXPERIMENTS

    lines = [f"  {name:<16} {exp.summary}" for name, exp in EXPERIMENTS.items()]
    lines.append(f"  {ALL:<16} every experiment above, each into OUT/NAME")
    return "\b\nExperiments:\n" + "\n".join(lines)


@click.command(
    "reproduce", short_help="Re-run one of the papers' experiments.", epilog=_experiment_list()
)
@click.argument("experiment", metavar="[EXPERIMENT]", required=False)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    metavar="DIR",
    help="Directory for results.csv, runs.csv, table.md and the PNG plots "
    "[default: reproduction/EXPERIMENT].",
)
@click.option(
    "--repeats",
    type=click.IntRange(min=1, max=1000),
    default=None,
    help="Runs per setting (seeds SEED..SEED+N-1): tables give their mean and 95% interval, "
    "and a claim is decided only when the interval of its paired reduction is clear of zero "
    "[default: 10 as the papers, 3 with --quick; 1 decides nothing].",
)
@click.option(
    "--quick",
    is_flag=True,
    help="Small smoke-test size (5,000 users, 200-300 slots, 3 points of each sweep): minutes, not "
    "hours.",
)
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Repeat r uses seed SEED + r for the population, the stream and the noise.",
)
@click.option(
    "--users",
    type=click.IntRange(min=1, max=10**8),
    default=None,
    help="Override the number of users of every run [default: the paper's, or the quick size].",
)
@click.option(
    "--slots",
    type=click.IntRange(min=1, max=10**7),
    default=None,
    help="Override the number of slots of every run [default: the paper's, or the quick size].",
)
@click.option(
    "--fingerprint/--no-fingerprint",
    default=True,
    show_default=True,
    help="Also run the experiment at a tiny size (seconds) into fingerprint.csv, which the "
    "test suite re-runs to find results a later change made stale.",
)
@click.option(
    "--check",
    "check_dirs",
    type=click.Path(path_type=Path, file_okay=False),
    multiple=True,
    metavar="DIR",
    help="Instead of a new run: re-run the command DIR/provenance.json records (same seeds and "
    "sizes) and compare its CSV files and table.md with DIR's (plots are not compared); exit 1 "
    "if any differs. Repeatable; no EXPERIMENT or other option with it.",
)
def reproduce_cmd(
    experiment: str | None,
    out_dir: Path | None,
    repeats: int | None,
    quick: bool,
    seed: int,
    users: int | None,
    slots: int | None,
    fingerprint: bool,
    check_dirs: tuple[Path, ...],
) -> None:
    """Re-run one of the papers' experiments on the synthetic streams (TLNS, Sin, Log).

    Every run goes through the runtime guard (a refused charge stops the command, exit 1).
    Writes results.csv (long form: experiment,dataset,mechanism,epsilon,w,metric,value,std,
    setting,runs,ci_low,ci_high: mean, standard deviation and 95% interval over the repeats),
    runs.csv (one line per run, with its value of every metric), table.md (the papers' layout,
    mean +- half the interval) and one PNG per metric (error bars: the intervals). The same seed gives the same files. Full sizes are the papers' (e.g. 200,000 users
    x 800 slots for 002); --quick, --users and --slots make them smaller.

    Beside the results, provenance.json records the command, the seeds, the commit and the
    SHA-256 of every file written, and fingerprint.csv the same experiment at a tiny size
    (docs/reproduction.md, "Results that cannot go stale").

    \b
    Examples:
      wevent reproduce pwsm-epsilon --quick --out out/pwsm
      wevent reproduce ldp-ids-w --users 20000 --slots 800 --repeats 3
      wevent reproduce --check docs/reproduction/cfpu
    """
    from wevent.experiments.registry import ALL, EXPERIMENTS

    if check_dirs:
        ctx = click.get_current_context()
        shown = {
            "experiment": "EXPERIMENT",
            "out_dir": "--out",
            "fingerprint": "--[no-]fingerprint",
        }
        given = [
            shown.get(name, f"--{name}")
            for name in ("experiment", "out_dir", "repeats", "quick", "seed", "users", "slots")
            if ctx.get_parameter_source(name) not in (ParameterSource.DEFAULT, None)
        ]
        if ctx.get_parameter_source("fingerprint") not in (ParameterSource.DEFAULT, None):
            given.append(shown["fingerprint"])
        if given:
            fail(f"--check re-runs what DIR records: {', '.join(given)} cannot go with it")
        _check(check_dirs)
        return
    if experiment is None:
        fail("missing EXPERIMENT (or --check DIR); `wevent reproduce --help` lists them")

    if experiment not in EXPERIMENTS and experiment != ALL:
        fail(
            f"unknown experiment {experiment!r}{did_you_mean(experiment, [*EXPERIMENTS, ALL])}"
            f" (expected one of {', '.join([*EXPERIMENTS, ALL])})"
        )
    missing = require("reproduce", "report")  # plots, checked before hours of runs
    if missing is not None:
        fail(missing)
    from wevent.experiments import provenance
    from wevent.experiments.harness import GuardRefused
    from wevent.experiments.registry import check_size_overrides, run_experiment

    out = out_dir if out_dir is not None else Path("reproduction") / experiment
    runs = repeats if repeats is not None else (3 if quick else 10)
    try:
        if out.exists() and not out.is_dir():
            raise InputError(f"--out: {out} exists and is not a directory")
        check_size_overrides(experiment, users, slots)  # before the fingerprints run
        written = [(experiment, out)]
        if experiment == ALL:
            written = [(each, out / each) for each in EXPERIMENTS]
        # The tiny runs first: seconds, and a size problem shows before the long runs.
        tiny = {name: provenance.fingerprint(name) if fingerprint else None for name, _ in written}
        files = run_experiment(experiment, out, runs, quick, seed, users=users, slots=slots)
        for name, where in written:
            command = provenance.command_line(name, where, runs, quick, seed, users, slots)
            files.append(
                provenance.write_provenance(
                    where,
                    experiment=name,
                    command=command,
                    repeats=runs,
                    quick=quick,
                    seed=seed,
                    users=users,
                    slots=slots,
                    tiny=tiny[name],
                    written=files,
                    sized=EXPERIMENTS[name].sized is not None,
                )
            )
    except InputError as exc:
        fail(str(exc))
    except GuardRefused as exc:
        click.echo(f"wevent reproduce: REFUSED by the guard: {exc}", err=True)
        sys.exit(EXIT_VIOLATION)
    except OSError as exc:
        fail(f"cannot write the results: {exc}")
    for path in files:
        click.echo(f"wrote {path}")


def _check(directories: tuple[Path, ...]) -> None:
    """`--check`: every directory's record read and checked first (a mistake in the last one
    shows before hours of runs), then each re-run and compared, its verdict printed as it
    ends; exit 1 if any differs."""
    from wevent.experiments.harness import GuardRefused
    from wevent.experiments.recheck import prepare, recheck, summary

    try:
        recorded = [prepare(directory) for directory in directories]
    except InputError as exc:
        fail(str(exc))
    same = True
    for run in recorded:
        click.echo(f"re-running {run.directory}: {run.command}", err=True)
        try:
            result = recheck(run)
        except GuardRefused as exc:
            click.echo(f"wevent reproduce: REFUSED by the guard: {exc}", err=True)
            sys.exit(EXIT_VIOLATION)
        except InputError as exc:
            fail(str(exc))
        for line in summary(result):
            click.echo(line)
        same = same and result.ok
    if not same:
        sys.exit(EXIT_VIOLATION)
