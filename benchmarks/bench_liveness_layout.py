"""Per-user liveness in one byte (the vector engine's stamps) against one bit per user (run
on demand from the repository's root: ``python -m benchmarks.bench_liveness_layout [--users
1000000] [--drawn 10000] [--slots 200]``).

Population division's guard reads and writes the per-user state of about 10,000 random users a
slot. With a stamp per user (one byte: the slot the user's one charge leaves its window) a slot
is one gather (is any drawn user live?) and one scatter (their new stamps); a charge leaves its
window with no write. With a bit per user (125 KB at 10^6 users instead of 1 MB: four times
fewer cache lines for the gather to fetch) a slot is a gather and a test of the bits, setting
the drawn users' bits, and clearing the bits of the users whose charge left the window, and
numpy has no scatter of single bits: each is a read-modify-write of whole bytes, with the
users that share a byte merged first. This times both per slot, with the arrays in cache
("warm") and after a pass over ``--evict-mb`` MB ("cold", as after a data path).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]


def _masks(codes: I64) -> tuple[I64, U8]:
    """Each user's byte in a bitset and their bit in it."""
    return codes >> 3, np.left_shift(np.uint8(1), (codes & 7).astype(np.uint8))


def _merged(values: U8, byte: I64, combine: Callable[[U8, U8], U8]) -> U8:
    """``values`` (one per user, ascending, so users of one byte are adjacent) where every
    entry of a byte holds what ``combine`` makes of all of them: a scatter then writes the same
    value for each, whatever the order it writes them in."""
    same = np.flatnonzero(byte[1:] == byte[:-1])
    while len(same):  # a few rounds: a byte holds 8 users
        before = values[same]
        values[same + 1] = combine(values[same + 1], values[same])
        values[same] = combine(values[same], values[same + 1])
        if np.array_equal(before, values[same]):  # (then every pair of neighbours is equal)
            break
    return values


def bits_slot(bits: U8, drawn: I64, leaving: I64) -> bool:
    """One slot on a bitset: is a drawn user live, then set theirs and clear the leaving."""
    byte, bit = _masks(drawn)
    held = bits[byte]
    live = bool((held & bit).any())
    bits[byte] = _merged(held | bit, byte, np.bitwise_or)
    byte, bit = _masks(leaving)
    bits[byte] = _merged(bits[byte] & ~bit, byte, np.bitwise_and)
    return live


def stamps_slot(stamps: U8, drawn: I64, slot: int) -> bool:
    """One slot on stamps: is a drawn user live, then write their stamps."""
    live = int(stamps[drawn].max()) > slot
    stamps[drawn] = slot + 1
    return live


def run(users: int, drawn: int, slots: int, evict_mb: int) -> tuple[float, float]:
    """Median microseconds per slot on stamps and on bits (the same draws)."""
    if not 1 < slots < 255:
        raise SystemExit("--slots must be 2 to 254 (stamps count slots in a byte)")
    order = np.random.default_rng(1).permutation(users)
    per = users // drawn
    draws = [np.sort(order[(k % per) * drawn : (k % per + 1) * drawn]) for k in range(slots)]
    stamps = np.zeros(users, np.uint8)
    bits = np.zeros((users + 7) // 8, np.uint8)
    reference = np.zeros(users, bool)
    junk = np.zeros(evict_mb * 2**20, np.uint8)
    on_stamps: list[float] = []
    on_bits: list[float] = []
    for t in range(1, slots):
        idx, leaving = draws[t], draws[t - 1]  # (a window of one slot)
        if evict_mb:
            junk += 1
        start = time.thread_time()
        stamps_slot(stamps, idx, t)
        on_stamps.append(time.thread_time() - start)
        if evict_mb:
            junk += 1
        start = time.thread_time()
        bits_slot(bits, idx, leaving)
        on_bits.append(time.thread_time() - start)
        reference[idx] = True  # (a bool per user: what the bits must say)
        reference[leaving] = False
    if not np.array_equal(np.unpackbits(bits, bitorder="little")[:users], reference):
        raise SystemExit("the bitset went wrong")
    return float(np.median(on_stamps)) * 1e6, float(np.median(on_bits)) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--users", type=int, default=1_000_000)
    parser.add_argument("--drawn", type=int, default=10_000)
    parser.add_argument("--slots", type=int, default=200)
    parser.add_argument("--evict-mb", type=int, default=64)
    args = parser.parse_args()
    print(f"{args.users:,} users, {args.drawn:,} drawn per slot, {args.slots} slots (thread CPU)")
    for label, evict in (("warm", 0), (f"cold ({args.evict_mb} MB between)", args.evict_mb)):
        stamp_us, bit_us = run(args.users, args.drawn, args.slots, evict)
        print(f"{label}: one byte (stamps) {stamp_us:.0f} us, one bit {bit_us:.0f} us per slot")


if __name__ == "__main__":
    main()
