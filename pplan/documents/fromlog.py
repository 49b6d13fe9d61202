"""The `pplan explain --from-log FILE --json` document (`pplan.fromlog/1`), filled by pplan.logs.compare: what
the log gave and where, what was assumed, the steady state measured, predicted against measured for step time,
tokens/s, MFU (both conventions) and peak memory, the terms most likely behind the gap, and the full explanation
of the rebuilt plan."""

from __future__ import annotations

from pydantic import Field

from pplan.documents.base import SCHEMA_KEY, Out
from pplan.documents.explain import ExplainReport

FROMLOG_SCHEMA = "pplan.fromlog/1"


class ReadFieldOut(Out):
    field: str
    """The plan or model field, in pplan's names (its flag: --tp for tp, ...)."""
    value: str
    """The value as read, in pplan's units."""
    source: str
    """Where it was read: the log's line ("arguments block, line 12"), "flag", or how it was derived."""


class SteadyStateOut(Out):
    statistic: str
    """How the steady-state step time was taken from the iterations used (the median)."""
    step_s: float
    """The steady-state step time, seconds."""
    iterations_used: list[int]
    """The iteration numbers the statistic was taken over."""
    warmup_left_out: list[int]
    """The leading iterations left out as warm-up."""
    outliers_left_out: list[int]
    """Slow iterations left out (profiling, checkpointing, evaluation)."""
    description: str
    """The above in one sentence, as the table prints it."""


class ComparisonOut(Out):
    quantity: str
    """step_s, tokens_per_s, mfu, mfu_causal, peak_memory_bytes."""
    predicted: float
    """pplan's figure for the rebuilt plan, in the quantity's unit (seconds, tokens/s, a fraction, bytes)."""
    measured: float
    """The log's figure, same unit."""
    error: float
    """(predicted − measured) / measured."""
    note: str = ""
    """How the two figures were taken (the steady state used, the FLOP convention, which memory figure)."""


class GapTermOut(Out):
    term: str
    """The figure or step-time term that could account for the gap."""
    predicted_s: float
    """The term's predicted seconds in the step (on the busiest rank; 0 for a figure that spreads over terms)."""
    figure_now: float | None
    """The figure as pplan has it (an efficiency, µs per kernel), null for a term read in seconds only."""
    figure_needed: float | None
    """The figure that makes predicted equal measured (the others held), null where no value does."""
    needed_s: float | None
    """The term's seconds for predicted to equal measured, the rest held (null for a figure-only term)."""
    plausible: bool
    """Whether the needed figure or seconds lie within what such hardware and stacks reach."""
    why: str
    """The reason, in one sentence."""


class FromLogReport(Out):
    schema_: str = Field(FROMLOG_SCHEMA, alias=SCHEMA_KEY)
    """The document's version: pplan.fromlog/1."""
    log: str
    """The log file as given."""
    stack: str | None
    """The stack whose lines the log holds: megatron-core, megatron-bridge (NeMo 2 / Megatron-Bridge), torchtitan."""
    gpu_name: str | None
    """The GPU name the log printed, null where it printed none."""
    model_source: str
    """Where the model shape came from: a bundled model matched by shape, the logged shape, or --model."""
    hardware_source: str
    """Where the hardware profile came from: the logged GPU name or --hardware."""
    read: list[ReadFieldOut]
    """Every field the log (or a flag) gave, with where."""
    assumed: list[str]
    """Every field neither the log nor a flag gave, with the value pplan took."""
    steady_state: SteadyStateOut
    """Which iterations the measured step time was taken over, and how."""
    measured_step_s: float
    """The measured steady-state step time, seconds."""
    measured_tokens_per_s: float
    """Global batch × sequence length / the measured step."""
    measured_mfu: float
    """Model FLOPs utilisation of the BF16 peak at the measured step, pplan's FLOP count, non-causal convention."""
    measured_mfu_causal: float
    """The same, the attention core counted over the causal half (the newer tables' convention)."""
    logged_tflops_per_gpu: float | None
    """The throughput the log itself printed (the stack's own FLOP count), median over the steady state."""
    logged_mfu: float | None
    """torchtitan's own printed MFU, median over the steady state."""
    measured_peak_reserved_bytes: int | None
    """The largest peak reserved memory the log printed (the caching allocator's), bytes; null where none."""
    measured_peak_allocated_bytes: int | None
    """The largest peak allocated memory the log printed, bytes; null where none."""
    comparison: list[ComparisonOut]
    """Predicted against measured, one row per quantity."""
    gap: float
    """(predicted − measured) / measured step time."""
    gap_terms: list[GapTermOut]
    """Most likely first: plausible terms, then by how little each would have to move."""
    calibrated_on_user_runs: bool
    """The hardware profile was written by `pplan calibrate` from the user's own logs."""
    explain: ExplainReport
    """The rebuilt plan's full explanation (the pplan.explain/2 document)."""
