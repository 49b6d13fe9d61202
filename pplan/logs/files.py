"""Reading a log file's text for `explain --from-log` and `calibrate`: bounded in size, any encoding decoded with
replacement, every failure one line naming the flag and the file."""

from __future__ import annotations

from pathlib import Path

from pplan.errors import ConfigError
from pplan.logs.read import read_log
from pplan.logs.record import LogRecord, SteadyState
from pplan.reading import TooLarge, read_bounded

MAX_LOG_BYTES = 256 * 2**20
"""Largest log read (256 MiB): a long run's full multi-rank log, well past any excerpt."""


def read_text(path: str, flag: str) -> str:
    """The log's text, read through pplan.reading (at most `MAX_LOG_BYTES` from the stream: a pipe or a process
    substitution `<(zcat run.log.gz)` reads as a file does), decoded as UTF-8 with replacement."""
    p = Path(path).expanduser()
    try:
        data = read_bounded(p, MAX_LOG_BYTES)
    except TooLarge:
        raise ConfigError(
            flag, f"{path} is over {MAX_LOG_BYTES // 2**20} MiB", "pass an excerpt of the log"
        ) from None
    except IsADirectoryError:
        raise ConfigError(flag, f"{path} is a folder", "give the path of a training log") from None
    except OSError as err:
        raise ConfigError(flag, f"cannot read {path}: {err.strerror or err}", "check the path") from None
    return data.decode("utf-8", errors="replace")


def read_record(path: str, flag: str) -> LogRecord:
    """The log at `path`; refused in one line when it has no iteration line with a step time (or, for torchtitan,
    a throughput the rebuilt plan turns into one)."""
    record = read_log(read_text(path, flag))
    if not record.iterations and not record.tps_steps:
        extra = f" ({record.notes[0]})" if record.notes else ""
        raise ConfigError(
            flag,
            f"{path}: no iteration lines with a step time found (Megatron 'elapsed time per iteration', "
            f"NeMo 'train_step_timing', torchtitan 'step: … tps:'){extra}",
            "pass a log that holds the training iterations",
        )
    return record


def steady_of(record: LogRecord, path: str, flag: str) -> SteadyState:
    """The steady state of `record`; refused in one line when there is none."""
    steady = record.steady
    if steady is None:
        only = ", ".join(str(it.number) for it in record.iterations) or "none"
        raise ConfigError(
            flag,
            f"{path}: no steady state: only iteration {only} is logged, which may include the warm-up",
            "pass a log with at least two logged iterations",
        )
    return steady


def read_usable(path: str, flag: str) -> tuple[LogRecord, SteadyState]:
    """The log at `path` and its steady state, as read (`read_record`, `steady_of`)."""
    record = read_record(path, flag)
    return record, steady_of(record, path, flag)
