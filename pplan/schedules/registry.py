"""The schedule registry: one name per schedule family, torch's class names as aliases, cached generation.

`get_schedule(name, p, m, v=None)` returns the `Schedule` for p ranks, m micro-batches and v stages per rank
(None = the family's default: 1, or 2 for the interleaved and V families). Names are case-insensitive; torch's
class names (`Schedule1F1B`, `ScheduleInterleaved1F1B`, ...) and their short forms (`1F1B`, `Interleaved1F1B`,
...) are accepted. Generation is cached by (name, p, v, m), so repeated planning loops reuse the same object
(and the timeline's compiled form of it).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from pplan.errors import ConfigError
from pplan.schedules.actions import Schedule
from pplan.schedules.dualpipe import dualpipe, dualpipev
from pplan.schedules.gpipe import gpipe
from pplan.schedules.interleaved import interleaved_1f1b, interleaved_zb, looped_bfs
from pplan.schedules.one_f_one_b import one_f_one_b
from pplan.schedules.zbv import zbv
from pplan.schedules.zero_bubble import zb_h1, zb_h2

Generator = Callable[[int, int, int | None], Schedule]

_GENERATORS: dict[str, Generator] = {
    "gpipe": gpipe,
    "1f1b": one_f_one_b,
    "interleaved-1f1b": interleaved_1f1b,
    "interleaved-zb": interleaved_zb,
    "looped-bfs": looped_bfs,
    "zb-h1": zb_h1,
    "zb-h2": zb_h2,
    "zbv": zbv,
    "dualpipev": dualpipev,
    "dualpipe": dualpipe,
}

SCHEDULE_NAMES: tuple[str, ...] = tuple(_GENERATORS)
"""Canonical names, in the order a listing should show them."""

_ALIASES: dict[str, str] = {
    "schedulegpipe": "gpipe",
    "schedule1f1b": "1f1b",
    "pipedream-flush": "1f1b",
    "interleaved1f1b": "interleaved-1f1b",
    "scheduleinterleaved1f1b": "interleaved-1f1b",
    "interleaved": "interleaved-1f1b",
    "interleavedzerobubble": "interleaved-zb",
    "scheduleinterleavedzerobubble": "interleaved-zb",
    "loopedbfs": "looped-bfs",
    "scheduleloopedbfs": "looped-bfs",
    "zbh1": "zb-h1",
    "zbh2": "zb-h2",
    "zb-v": "zbv",
    "zbvzerobubble": "zbv",
    "schedulezbvzerobubble": "zbv",
    "dualpipe-v": "dualpipev",
    "scheduledualpipev": "dualpipev",
}


def canonical_name(name: str) -> str:
    """The registry name for `name` (case-insensitive; torch class names accepted), or a ConfigError."""
    key = name.strip().lower().replace("_", "-")
    if key in _GENERATORS:
        return key
    squashed = key.replace("-", "")
    for k in (key, squashed):
        if k in _ALIASES:
            return _ALIASES[k]
    for canon in _GENERATORS:
        if canon.replace("-", "") == squashed:
            return canon
    raise ConfigError(
        "--schedule", f"unknown schedule {name!r}", f"choose one of {', '.join(SCHEDULE_NAMES)}"
    )


def get_schedule(name: str, p: int, m: int, v: int | None = None) -> Schedule:
    """The schedule `name` for p ranks, m micro-batches, v stages per rank (checked; cached)."""
    return _cached(canonical_name(name), p, m, v)


@lru_cache(maxsize=512)
def _cached(name: str, p: int, m: int, v: int | None) -> Schedule:
    return _GENERATORS[name](p, m, v)
