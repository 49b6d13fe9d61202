"""GPU-hours, cost and energy of a run of G GPUs for T seconds of wall time.

- GPU-hours = G · T / 3600;
- cost = GPU-hours × the price per GPU-hour (none without a price: never guessed);
- energy = T / 3600 · (G · P_gpu + N · P_node) · PUE / 1000 kWh, N = G / GPUs per node whole nodes, P_gpu the
  GPUs' board power and P_node the rest of a node at full load (`PowerSpec`, datasheet maxima: an upper bound),
  PUE the facility's power usage effectiveness (`--pue`, default 1.0: the IT load alone).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pplan.profiles.hardware_spec import HardwareSpec, PowerSpec

DEFAULT_PUE = 1.0
"""The IT load alone; a data centre adds its cooling and conversion losses with `--pue` (1.1-1.5 typical)."""


def prices_per_gpu_hour(
    hardware: Sequence[HardwareSpec], given: Sequence[tuple[str, float]]
) -> dict[str, float]:
    """The price per GPU-hour of each hardware that has one: its profile's, replaced by a `given` (name, USD) pair
    (`--price`); a hardware with neither has no price."""
    prices = {s.name: s.price_usd_per_gpu_hour for s in hardware if s.price_usd_per_gpu_hour is not None}
    prices.update(dict(given))
    return prices


@dataclass(frozen=True, slots=True)
class RunCost:
    """What a run of `gpus` GPUs for `wall_s` seconds uses."""

    gpu_hours: float
    cost_usd: float | None
    """None without a price."""
    energy_kwh: float | None
    """None without a `[power]` section in the hardware profile."""


def nodes(gpus: int, gpus_per_node: int) -> int:
    """Whole nodes holding `gpus` GPUs."""
    return math.ceil(gpus / gpus_per_node)


def run_cost(
    gpus: int,
    gpus_per_node: int,
    wall_s: float,
    price_usd_per_gpu_hour: float | None,
    power: PowerSpec | None,
    pue: float = DEFAULT_PUE,
) -> RunCost:
    """GPU-hours, cost and energy (module docstring)."""
    hours = wall_s / 3600
    gpu_hours = gpus * hours
    energy = None
    if power is not None:
        watts = gpus * power.gpu_watts + nodes(gpus, gpus_per_node) * power.node_overhead_watts
        energy = hours * watts * pue / 1000
    cost = gpu_hours * price_usd_per_gpu_hour if price_usd_per_gpu_hour is not None else None
    return RunCost(gpu_hours=gpu_hours, cost_usd=cost, energy_kwh=energy)
