"""Loaders for the real data sets of the papers, turning their public formats into the
``user,slot,value`` observations that `wevent.mechanisms.streams.CsvStream` (and ``wevent run
--stream FILE``) read.

* T-Drive (001 Section 6.1, 002 Section 7.1.2, 000 Section VI-A): one text file per taxi, lines
  ``taxi_id,YYYY-MM-DD HH:MM:SS,longitude,latitude``. Duplicates and points outside the area
  A_E = [116, 116.8] x [39.5, 40.3] are dropped; A_E is cut into a g x g grid (001: 10 x 10,
  d = 100 cells; value = row * g + column) and time into slots of ``interval`` seconds (001:
  one minute). A taxi's value at a slot is the cell of its last point in that slot.
* Foursquare (Yang et al.'s global check-ins, 001 Section 6.1, 002 Section 7.1.2): a tab-separated
  check-in file ``user_id, venue_id, UTC time ('Tue Apr 03 18:00:09 +0000 2012'), offset`` and a
  POI file ``venue_id, latitude, longitude, category, country code``. Each venue becomes its
  country (value = the country's index in sorted order); time is cut into slots of ``interval``
  seconds (001: 100 minutes); a user's value at a slot is the country of their last check-in in
  it. ``fraction`` keeps a seeded uniform sample of the users (001: 5%).

Both write rows sorted by slot then user. ``fill`` carries each user's last value forward (and
their first value backward) so that every user has a value at every slot, which the population
allocators need (they perturb each drawn user's own value).
"""

from __future__ import annotations

import csv
import datetime as dt
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

from wevent.accounting.budget import BudgetError, shown
from wevent.accounting.formats import FormatError
from wevent.accounting.inputs import check_input_file

__all__ = [
    "TDRIVE_AREA",
    "Observations",
    "foursquare_observations",
    "grid_cell",
    "tdrive_observations",
    "write_observations",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

# 001 Section 6.1: longitude 116..116.8, latitude 39.5..40.3.
TDRIVE_AREA: Final = (116.0, 116.8, 39.5, 40.3)
FOURSQUARE_TIME: Final = "%a %b %d %H:%M:%S %z %Y"
# A position as the data sets write it: a decimal in ASCII digits, with an optional exponent.
# ``float`` alone also takes "1_16.5", other scripts' digits, "nan" and "inf".
_DECIMAL: Final = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _position(text: str) -> float:
    """A finite longitude or latitude (ValueError for anything else)."""
    if not _DECIMAL.fullmatch(text):
        raise ValueError(f"not a decimal position: {text!r}")
    value = float(text)
    if not math.isfinite(value):  # 1e400
        raise ValueError("not a finite position")
    return value


def _time(text: str, layout: str) -> dt.datetime:
    """``strptime`` on ASCII text only (it reads other scripts' digits as digits)."""
    if not text.isascii():
        raise ValueError(f"not ASCII: {text!r}")
    return dt.datetime.strptime(text, layout)


@dataclass(frozen=True)
class Observations:
    """Per-row user, slot (from 1) and value, plus the names of the values and of the users."""

    user: IntArray
    slot: IntArray
    value: IntArray
    users: tuple[str, ...]
    values: tuple[str, ...]

    @property
    def slots(self) -> int:
        return int(self.slot.max()) if len(self.slot) else 0


def grid_cell(lon: FloatArray, lat: FloatArray, area: Sequence[float], g: int) -> IntArray:
    """The cell row * g + column of each point in the g x g grid over ``area`` (lon0, lon1,
    lat0, lat1); -1 outside. The upper edges belong to the last row and column."""
    lon0, lon1, lat0, lat1 = area
    inside = (lon >= lon0) & (lon <= lon1) & (lat >= lat0) & (lat <= lat1)
    col = np.minimum(((lon - lon0) / (lon1 - lon0) * g).astype(np.int64), g - 1)
    row = np.minimum(((lat - lat0) / (lat1 - lat0) * g).astype(np.int64), g - 1)
    out: IntArray = np.where(inside, row * g + col, -1).astype(np.int64)
    return out


def _last_per_user_slot(
    user: IntArray, slot: IntArray, order_key: FloatArray, value: IntArray
) -> tuple[IntArray, IntArray, IntArray]:
    """Keep the row with the largest ``order_key`` (time) for every (user, slot)."""
    order = np.lexsort((order_key, user, slot))
    u, s, v = user[order], slot[order], value[order]
    last = np.ones(len(u), dtype=bool)
    if len(u) > 1:
        last[:-1] = (u[1:] != u[:-1]) | (s[1:] != s[:-1])
    return u[last], s[last], v[last]


MAX_FILL_CELLS = 2**27  # users x slots of a filled stream (8 bytes each)


def _fill(
    user: IntArray, slot: IntArray, value: IntArray, n_users: int, slots: int
) -> tuple[IntArray, IntArray, IntArray]:
    """Every user at every slot: the last value carried forward, the first carried backward."""
    if n_users * slots > MAX_FILL_CELLS:  # checked before the grid is allocated
        raise BudgetError(
            f"--fill: {n_users:,} users x {slots:,} slots is more than {MAX_FILL_CELLS:,} cells "
            "(a long span cut into short slots); choose a longer --interval or leave out --fill"
        )
    grid = np.full((n_users, slots), -1, dtype=np.int64)
    grid[user, slot - 1] = value
    for row in grid:
        known = np.flatnonzero(row >= 0)
        if len(known) == 0:
            continue
        idx = np.maximum.accumulate(np.where(row >= 0, np.arange(slots), -1))
        idx[idx < 0] = known[0]
        row[:] = row[idx]
    seen: npt.NDArray[np.bool_] = np.asarray((grid >= 0).any(axis=1), dtype=bool)
    u, s = np.nonzero(grid >= 0)
    keep = seen[u]
    return u[keep].astype(np.int64), (s[keep] + 1).astype(np.int64), grid[u[keep], s[keep]]


def _finish(
    user: IntArray,
    slot: IntArray,
    when: FloatArray,
    value: IntArray,
    users: Sequence[str],
    values: Sequence[str],
    fill: bool,
) -> Observations:
    u, s, v = _last_per_user_slot(user, slot, when, value)
    if fill and len(s):
        u, s, v = _fill(u, s, v, len(users), int(s.max()))
    order = np.lexsort((u, s))
    return Observations(u[order], s[order], v[order], tuple(users), tuple(values))


def _slots(seconds: FloatArray, interval: int) -> IntArray:
    if interval < 1:
        raise BudgetError(f"the slot interval must be at least 1 second, got {interval}")
    start = float(seconds.min())
    out: IntArray = ((seconds - start) // interval).astype(np.int64) + 1
    return out


def _named(paths: Sequence[Path]) -> str:
    """The files of a data set, for a message: one named, or how many and the first."""
    if len(paths) == 1:
        return str(paths[0])
    return f"the {len(paths):,} files given ({paths[0]}, ...)" if paths else "no file"


def tdrive_observations(
    files: Iterable[str | Path],
    *,
    grid: int = 10,
    interval: int = 60,
    area: Sequence[float] = TDRIVE_AREA,
    fill: bool = False,
) -> Observations:
    """Read T-Drive taxi files (001 Section 6.1): grid cells per slot of ``interval`` seconds."""
    if grid < 1:
        raise BudgetError(f"the grid needs at least 1 x 1 cells, got {grid}")
    taxis: dict[str, int] = {}
    rows: list[tuple[int, float, float, float]] = []
    paths = [Path(f) for f in files]
    for path in paths:
        check_input_file(path)
        try:
            with path.open(encoding="utf-8-sig", newline="") as fh:
                for line_no, rec in enumerate(csv.reader(fh), start=1):
                    if not rec or all(not f.strip() for f in rec):
                        continue
                    if len(rec) != 4:
                        raise FormatError(
                            f"{path}:{line_no}: expected taxi_id,datetime,longitude,latitude"
                        )
                    key = tuple(f.strip(" \t") for f in rec)  # spaces and tabs only (formats.md)
                    try:
                        when = _time(key[1], "%Y-%m-%d %H:%M:%S")
                        lon, lat = _position(key[2]), _position(key[3])
                    except ValueError:
                        raise FormatError(
                            f"{path}:{line_no}: cannot read the time or position {shown(','.join(rec))}"
                        ) from None
                    taxi = taxis.setdefault(key[0], len(taxis))
                    stamp = when.replace(tzinfo=dt.UTC).timestamp()
                    rows.append((taxi, stamp, lon, lat))
        except OSError as exc:
            raise FormatError(f"{path}: cannot read ({exc.strerror or exc})") from None
        except (csv.Error, UnicodeDecodeError) as exc:  # a huge field, a stray quote, not UTF-8
            raise FormatError(f"{path}: not T-Drive text ({exc})") from None
    if not rows:
        raise FormatError(f"no T-Drive records found in {_named(paths)}")
    arr = np.unique(np.array(rows, dtype=np.float64), axis=0)  # 001 6.1: duplicates removed
    cell = grid_cell(arr[:, 2], arr[:, 3], area, grid)
    inside = cell >= 0
    if not inside.any():
        raise FormatError(f"no T-Drive record of {_named(paths)} lies inside the area")
    user = arr[inside, 0].astype(np.int64)
    when = arr[inside, 1]
    names = [f"cell{c}" for c in range(grid * grid)]
    return _finish(user, _slots(when, interval), when, cell[inside], list(taxis), names, fill)


def foursquare_observations(
    checkins: str | Path,
    pois: str | Path,
    *,
    interval: int = 6000,
    fraction: float = 1.0,
    seed: int = 0,
    fill: bool = False,
) -> Observations:
    """Read Foursquare check-ins and POIs (001 Section 6.1): countries per slot of ``interval``
    seconds (default 100 minutes), for a seeded ``fraction`` of the users."""
    if not 0 < fraction <= 1:
        raise BudgetError(f"the user fraction must be in (0, 1], got {fraction}")
    country: dict[str, str] = {}
    pois, checkins = Path(pois), Path(checkins)
    for given in (pois, checkins):
        check_input_file(given)
    reading = pois  # the file a csv or decoding error is in
    try:
        with pois.open(encoding="utf-8-sig", newline="") as fh:
            for line_no, rec in enumerate(csv.reader(fh, delimiter="\t"), start=1):
                if not rec:
                    continue
                if len(rec) < 5:
                    raise FormatError(
                        f"{pois}:{line_no}: expected venue_id, latitude, longitude, category, country"
                    )
                country[rec[0]] = rec[4].strip()
        users: dict[str, int] = {}
        rows: list[tuple[int, float, str]] = []
        reading = checkins
        with checkins.open(encoding="utf-8-sig", newline="") as fh:
            for line_no, rec in enumerate(csv.reader(fh, delimiter="\t"), start=1):
                if not rec:
                    continue
                if len(rec) < 3:
                    raise FormatError(f"{checkins}:{line_no}: expected user_id, venue_id, UTC time")
                c = country.get(rec[1])
                if not c:
                    continue  # an invalid record: its venue has no country
                try:
                    stamp = _time(rec[2].strip(" \t"), FOURSQUARE_TIME).timestamp()
                except ValueError:
                    raise FormatError(
                        f"{checkins}:{line_no}: cannot read the time {shown(rec[2])}"
                    ) from None
                rows.append((users.setdefault(rec[0], len(users)), stamp, c))
    except OSError as exc:
        raise FormatError(f"cannot read ({exc.strerror or exc}: {exc.filename})") from None
    except (csv.Error, UnicodeDecodeError) as exc:  # a huge field, a stray quote, not UTF-8
        raise FormatError(f"{reading}: not Foursquare text ({exc})") from None
    if not rows:
        raise FormatError(f"{checkins}: no check-in at a venue with a country")
    names = sorted({c for _, _, c in rows})
    index = {c: i for i, c in enumerate(names)}
    user = np.array([r[0] for r in rows], dtype=np.int64)
    when = np.array([r[1] for r in rows], dtype=np.float64)
    value = np.array([index[r[2]] for r in rows], dtype=np.int64)
    user_names = list(users)
    if fraction < 1:
        rng = np.random.default_rng(seed)
        k = max(1, round(fraction * len(user_names)))
        kept = np.sort(rng.permutation(len(user_names))[:k])
        remap = np.full(len(user_names), -1, dtype=np.int64)
        remap[kept] = np.arange(k)
        user = remap[user]
        keep = user >= 0
        user, when, value = user[keep], when[keep], value[keep]
        user_names = [user_names[i] for i in kept.tolist()]
    return _finish(user, _slots(when, interval), when, value, user_names, names, fill)


def write_observations(obs: Observations, path: str | Path) -> Path:
    """Write ``user,slot,value`` (the format of `CsvStream.load`)."""
    path = Path(path)
    with path.open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(["user", "slot", "value"])
        for u, s, v in zip(obs.user.tolist(), obs.slot.tolist(), obs.value.tolist(), strict=True):
            out.writerow([obs.users[u], s, v])
    return path
