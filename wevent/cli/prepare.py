"""`wevent prepare`: a real data set's public files as a 'user,slot,value' CSV stream."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from wevent.cli._common import check_writable, fail
from wevent.cli._group import WeventGroup
from wevent.errors import InputError

__all__ = ["prepare_group"]


@click.group(
    "prepare", cls=WeventGroup, short_help="Turn a real data set into a user,slot,value stream."
)
def prepare_group() -> None:
    """Turn a real data set's public files into a 'user,slot,value' CSV stream.

    The output is what 'wevent run --stream FILE' reads. Where to get the data:
    docs/reproduction.md, section 'Real data sets'.
    """


def _write_prepared(obs: Any, out: Path) -> None:
    from wevent.mechanisms.datasets import write_observations

    write_observations(obs, out)
    click.echo(
        f"wrote {out}: {len(obs.users)} users, {obs.slots} slots, d = {len(obs.values)} values, "
        f"{len(obs.slot)} observations"
    )


_fill_option = click.option(
    "--fill",
    is_flag=True,
    help="Give every user a value at every slot (last value carried forward, first value "
    "backward), as the population allocators need.",
)


@prepare_group.command("tdrive", short_help="T-Drive taxi trajectories (001).")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--out",
    "out",
    required=True,
    metavar="FILE",
    type=click.Path(path_type=Path, dir_okay=False),
)
@click.option(
    "--grid",
    type=click.IntRange(min=1, max=1000),
    default=10,
    show_default=True,
    help="Cut the area into GRID x GRID cells (d = GRID^2; 001 uses 10).",
)
@click.option(
    "--interval",
    type=click.IntRange(min=1),
    default=60,
    show_default=True,
    help="Slot length in seconds (001: one minute).",
)
@_fill_option
def prepare_tdrive_cmd(
    files: Sequence[Path], out: Path, grid: int, interval: int, fill: bool
) -> None:
    """T-Drive taxi files (one per taxi: 'taxi_id,datetime,longitude,latitude'), gridded over
    longitude 116-116.8 and latitude 39.5-40.3 as in 001 Section 6.1.

    \b
    Example:
      wevent prepare tdrive release/taxi_log_2008_by_id/*.txt --out taxi.csv --fill
    """
    from wevent.mechanisms.datasets import tdrive_observations

    check_writable(out)
    paths: list[Path] = []
    for f in files:
        paths.extend(sorted(f.glob("*.txt")) if f.is_dir() else [f])
    try:
        _write_prepared(tdrive_observations(paths, grid=grid, interval=interval, fill=fill), out)
    except InputError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot write {out}: {exc.strerror or exc}")


@prepare_group.command("foursquare", short_help="Foursquare check-ins by country (001, 002).")
@click.argument("checkins", type=click.Path(path_type=Path))
@click.argument("pois", type=click.Path(path_type=Path))
@click.option(
    "--out",
    "out",
    required=True,
    metavar="FILE",
    type=click.Path(path_type=Path, dir_okay=False),
)
@click.option(
    "--interval",
    type=click.IntRange(min=1),
    default=6000,
    show_default=True,
    help="Slot length in seconds (001: 100 minutes).",
)
@click.option(
    "--fraction",
    type=click.FloatRange(min=0, max=1, min_open=True),
    default=1.0,
    show_default=True,
    help="Keep this seeded fraction of the users (001: 0.05).",
)
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@_fill_option
def prepare_foursquare_cmd(
    checkins: Path, pois: Path, out: Path, interval: int, fraction: float, seed: int, fill: bool
) -> None:
    """Foursquare global check-ins (tab-separated CHECKINS: user, venue, UTC time, offset;
    POIS: venue, latitude, longitude, category, country): each check-in becomes its venue's
    country, as in 001 Section 6.1 and 002 Section 7.1.2.

    \b
    Example:
      wevent prepare foursquare dataset_TIST2015_Checkins.txt dataset_TIST2015_POIs.txt \\
          --out foursquare.csv --fraction 0.05 --fill
    """
    from wevent.mechanisms.datasets import foursquare_observations

    check_writable(out)
    try:
        obs = foursquare_observations(
            checkins, pois, interval=interval, fraction=fraction, seed=seed, fill=fill
        )
        _write_prepared(obs, out)
    except InputError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot write {out}: {exc.strerror or exc}")
