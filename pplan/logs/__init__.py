"""Reading a user's own training log (Megatron-LM / Megatron-Core, NeMo 2 / Megatron-Bridge, torchtitan).

The package owns turning log text into a `LogRecord` (pplan.logs.record): the configuration the log prints, each
field with where it was read, and what the run measured (per-iteration step times, the steady state and the
statistic taken over it, throughput, peak memory). `read_log(text)` cleans the text (pplan.logs.clean), reads it
with every stack's reader (pplan.logs.megatron, pplan.logs.nemo, pplan.logs.torchtitan) and keeps what each found;
the stack whose iteration lines are present names the log's stack. Pure parsing: no files, no terminal.
"""

from __future__ import annotations

from pplan.logs.read import read_log
from pplan.logs.record import Iteration, LogField, LogRecord, SteadyState

__all__ = ["Iteration", "LogField", "LogRecord", "SteadyState", "read_log"]
