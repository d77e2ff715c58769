"""benchmarks/bench_liveness_layout.py: its bitset does what a bool per user does (so the
figures in docs/performance.md time a correct alternative); the figures are never asserted."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.bench_liveness_layout import bits_slot, run, stamps_slot


def test_the_bitset_sets_and_clears_users_that_share_a_byte() -> None:
    bits = np.zeros(4, np.uint8)
    reference = np.zeros(32, bool)
    rng = np.random.default_rng(3)
    leaving = np.zeros(0, np.int64)
    for _ in range(30):
        drawn = np.sort(rng.choice(32, rng.integers(1, 12), replace=False)).astype(np.int64)
        was_live = bool(reference[drawn].any())
        assert bits_slot(bits, drawn, leaving) == was_live
        reference[drawn] = True
        reference[leaving] = False
        assert np.unpackbits(bits, bitorder="little").astype(bool).tolist() == reference.tolist()
        leaving = drawn
    whole_byte = np.arange(8, 16, dtype=np.int64)  # eight users of one byte at once
    bits_slot(bits, whole_byte, np.zeros(0, np.int64))
    assert int(bits[1]) == 255
    bits_slot(bits, np.zeros(0, np.int64), whole_byte)
    assert int(bits[1]) == 0


def test_stamps_tell_a_live_user() -> None:
    stamps = np.zeros(10, np.uint8)
    assert not stamps_slot(stamps, np.array([1, 2], np.int64), 5)  # stamps 6: live at 5
    assert stamps_slot(stamps, np.array([2, 3], np.int64), 5)
    assert not stamps_slot(stamps, np.array([2, 3], np.int64), 6)


def test_the_layout_benchmark_runs() -> None:
    stamp_us, bit_us = run(users=4096, drawn=64, slots=12, evict_mb=1)
    assert stamp_us > 0 and bit_us > 0
    with pytest.raises(SystemExit, match="--slots"):
        run(users=4096, drawn=64, slots=300, evict_mb=0)
