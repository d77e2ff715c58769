"""Populations: users mapped to requirement classes.

Class-level allocators (PBD, PBA, ...) give every user of a class the same budget, so the budget
logic costs O(classes) per slot; the class records its member ids once.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from wevent.accounting.budget import BudgetError
from wevent.accounting.requirements import Requirement

__all__ = ["Population", "RequirementClass"]


@dataclass(frozen=True, slots=True)
class RequirementClass:
    """A distinct requirement and the users who hold it."""

    index: int
    requirement: Requirement
    members: tuple[str, ...]

    @property
    def count(self) -> int:
        return len(self.members)

    @property
    def name(self) -> str:
        return f"class-{self.index}"


class Population:
    """An immutable mapping from user ids to requirements, grouped into requirement classes."""

    __slots__ = ("_by_user", "_class_ends", "_class_of", "_classes", "_order", "_order_classes")

    def __init__(self, requirements: Mapping[str, Requirement]) -> None:
        by_user: dict[str, Requirement] = {}
        grouped: dict[Requirement, list[str]] = {}
        for user, req in requirements.items():
            if not isinstance(user, str) or not user:
                raise BudgetError(f"user ids must be non-empty strings, got {user!r}")
            by_user[user] = req
            grouped.setdefault(req, []).append(user)
        self._by_user = by_user
        self._classes = tuple(
            RequirementClass(i, req, tuple(members))
            for i, (req, members) in enumerate(grouped.items())
        )
        self._class_of = {u: c for c in self._classes for u in c.members}
        self._order: tuple[str, ...] | None = None
        self._order_classes: npt.NDArray[np.int64] | None = None
        self._class_ends = np.cumsum([c.count for c in self._classes], dtype=np.int64)

    @classmethod
    def from_classes(cls, classes: Mapping[Requirement, int], prefix: str = "u") -> Population:
        """Build a population with ``count`` synthetic users per requirement (ids u1, u2, ...)."""
        reqs: dict[str, Requirement] = {}
        n = 0
        for req, count in classes.items():
            for _ in range(count):
                n += 1
                reqs[f"{prefix}{n}"] = req
        return cls(reqs)

    @property
    def classes(self) -> tuple[RequirementClass, ...]:
        return self._classes

    @property
    def users(self) -> tuple[str, ...]:
        """Every user in the canonical order: class by class, each class's members in order.
        Index-based group definitions (`Spender.define_group_by_index`) refer to this order."""
        if self._order is None:
            self._order = tuple(u for c in self._classes for u in c.members)
        return self._order

    def class_index_array(self) -> npt.NDArray[np.int64]:
        """The class index of every user in the canonical order (`users`); read-only."""
        if self._order_classes is None:
            sizes = [c.count for c in self._classes]
            arr = np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)
            arr.flags.writeable = False
            self._order_classes = arr
        return self._order_classes

    def classes_at(self, indices: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The class index of the users at ``indices`` of the canonical order: the same as
        ``class_index_array()[indices]``, by binary search over the class boundaries (no
        random access into an n-long array: cheaper for large populations)."""
        found: npt.NDArray[np.int64] = np.searchsorted(self._class_ends, indices, side="right")
        return found.astype(np.int64, copy=False)

    def requirement_of(self, user: str) -> Requirement:
        try:
            return self._by_user[user]
        except KeyError:
            raise BudgetError(f"user {user!r} has no declared requirement") from None

    def class_of(self, user: str) -> RequirementClass:
        try:
            return self._class_of[user]
        except KeyError:
            raise BudgetError(f"user {user!r} has no declared requirement") from None

    def class_indices(self, users: list[str]) -> list[int]:
        """The class index of each user, or -1 for users without a requirement."""
        lookup = self._class_of
        return [c.index if (c := lookup.get(u)) is not None else -1 for u in users]

    def get(self, user: str) -> Requirement | None:
        return self._by_user.get(user)

    def __contains__(self, user: object) -> bool:
        return user in self._by_user

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_user)

    def __len__(self) -> int:
        return len(self._by_user)

    def items(self) -> Iterator[tuple[str, Requirement]]:
        return iter(self._by_user.items())
