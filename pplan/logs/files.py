"""Reading a log file's text for `explain --from-log` and `calibrate`: bounded in size, any encoding decoded with
replacement, every failure one line naming the flag and the file."""

from __future__ import annotations

from pathlib import Path

from pplan.errors import ConfigError
from pplan.logs.read import read_log
from pplan.logs.record import LogRecord, SteadyState

MAX_LOG_BYTES = 256 * 2**20
"""Largest log read (256 MiB): a long run's full multi-rank log, well past any excerpt."""


def read_text(path: str, flag: str) -> str:
    p = Path(path).expanduser()
    try:
        if not p.is_file():
            raise ConfigError(flag, f"{path} is not a file", "give the path of a training log")
        if p.stat().st_size > MAX_LOG_BYTES:
            raise ConfigError(
                flag, f"{path} is over {MAX_LOG_BYTES // 2**20} MiB", "pass an excerpt of the log"
            )
        data = p.read_bytes()
    except OSError as err:
        raise ConfigError(flag, f"cannot read {path}: {err.strerror or err}", "check the path") from None
    return data.decode("utf-8", errors="replace")


def read_usable(path: str, flag: str) -> tuple[LogRecord, SteadyState]:
    """The log at `path` and its steady state; refused in one line when it has no iteration line or no steady
    state."""
    record = read_log(read_text(path, flag))
    if not record.iterations:
        extra = f" ({record.notes[0]})" if record.notes else ""
        raise ConfigError(
            flag,
            f"{path}: no iteration lines with a step time found (Megatron 'elapsed time per iteration', "
            f"NeMo 'train_step_timing', torchtitan 'step: … tps:'){extra}",
            "pass a log that holds the training iterations",
        )
    steady = record.steady
    if steady is None:
        only = ", ".join(str(it.number) for it in record.iterations)
        raise ConfigError(
            flag,
            f"{path}: no steady state: only iteration {only} is logged, which may include the warm-up",
            "pass a log with at least two logged iterations",
        )
    return record, steady
