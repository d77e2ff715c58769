"""The available-user pool of the population-division allocators (002 Algorithms 3-4; 000
Algorithms 3-6): sampling without replacement, removal, and recycling after ``R`` slots.

Users are integer indices ``0 .. n-1``. The available ones sit in the first ``size`` cells of an
array; a draw picks ``k`` uniform positions among them (numpy's sampler without replacement:
O(k) for small k, one permutation of the available users otherwise, which is then O(k) too since
k is a sizeable share of them), removes them by moving the array's tail into the holes, and
remembers the batch with its slot. ``release(t)`` at the start of slot t puts back every batch
drawn at slot ``t - R`` or earlier, so a user drawn at slot s reports again at slot ``s + R`` at the
earliest and never twice within ``R`` consecutive slots. ``putback`` returns users drawn but not
used (a publication sampled before the decision and then skipped, 000 Algorithm 3 line 14). Every
operation costs O(users moved); nothing is O(n) per slot.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np
import numpy.typing as npt

from wevent.accounting.budget import BudgetError
from wevent.errors import WeventError

__all__ = ["PoolExhausted", "UserPool"]

IntArray = npt.NDArray[np.int64]


class PoolExhausted(WeventError):
    """A draw asked for more users than the pool holds (the published PLPA+/OPS rules can)."""

    def __init__(self, slot: int, asked: int, available: int, what: str) -> None:
        self.slot, self.asked, self.available, self.what = slot, asked, available, what
        super().__init__(
            f"slot {slot}: the {what} draw asked for {asked} users but only {available} are "
            "available (the rest are still inside their recycle period)"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.slot, self.asked, self.available, self.what))


class UserPool:
    """Available users ``0 .. n-1``, recycled ``recycle`` slots after they were drawn."""

    def __init__(self, n: int, recycle: int, rng: np.random.Generator) -> None:
        if n < 0 or recycle < 1:
            raise BudgetError(
                f"a pool needs n >= 0 users and a recycle period >= 1, got {n}, {recycle}"
            )
        self.n = n
        self.recycle = recycle
        self._rng = rng
        self._avail: IntArray = np.arange(n, dtype=np.int64)
        self._size = n
        self._out: deque[tuple[int, IntArray]] = deque()
        self._slot = 0

    @property
    def available(self) -> int:
        return self._size

    @property
    def out(self) -> int:
        """Users drawn and not yet recycled."""
        return self.n - self._size

    def release(self, slot: int) -> int:
        """Start slot ``slot``: recycle every batch drawn at ``slot - R`` or earlier. Returns the
        number of users recycled."""
        if slot < self._slot:
            raise BudgetError(f"slot {slot} is before the pool's slot {self._slot}")
        self._slot = slot
        back = 0
        while self._out and self._out[0][0] <= slot - self.recycle:
            _, batch = self._out.popleft()
            self._append(batch)
            back += len(batch)
        return back

    def _append(self, users: IntArray) -> None:
        k = len(users)
        self._avail[self._size : self._size + k] = users
        self._size += k

    def draw(self, k: int, *, what: str = "sample") -> IntArray:
        """Remove ``k`` uniformly chosen available users and return them (sorted)."""
        if k < 0:
            raise BudgetError(f"cannot draw {k} users")
        if k > self._size:
            raise PoolExhausted(self._slot, k, self._size, what)
        if k == 0:
            return np.zeros(0, dtype=np.int64)
        size = self._size
        pos = np.sort(self._rng.choice(size, size=k, replace=False).astype(np.int64))
        chosen = self._avail[pos].copy()
        tail_start = size - k
        holes = pos[pos < tail_start]
        in_tail = np.zeros(k, dtype=bool)
        in_tail[pos[pos >= tail_start] - tail_start] = True
        fillers = np.flatnonzero(~in_tail) + tail_start
        self._avail[holes] = self._avail[fillers]
        self._size = tail_start
        self._out.append((self._slot, chosen))
        chosen.sort()
        return chosen

    def putback(self, users: IntArray) -> None:
        """Return users of the latest draw that did not report (they were never charged)."""
        if len(users) == 0:
            return
        if not self._out or self._out[-1][0] != self._slot:
            raise BudgetError("putback only undoes a draw of the current slot")
        slot, batch = self._out.pop()
        keep = np.setdiff1d(batch, users, assume_unique=True)
        if len(keep) + len(users) != len(batch):
            raise BudgetError("putback: users that were not in the latest draw")
        if len(keep):
            self._out.append((slot, keep))
        self._append(np.asarray(users, dtype=np.int64))
