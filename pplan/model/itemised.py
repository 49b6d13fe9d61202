"""Named quantities that sum to a total: the shape every itemised result (FLOPs, activation bytes) shares."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Itemised:
    """(name, amount) pairs; `total` is their sum, `get(name)` the sum under one name."""

    items: tuple[tuple[str, float], ...]

    @property
    def total(self) -> float:
        return sum(n for _, n in self.items)

    def get(self, name: str) -> float:
        total: float = (
            0  # the same sum, in the same order, as sum() over the matching amounts; a loop is cheaper
        )
        for key, n in self.items:
            if key == name:
                total += n
        return total
