"""The versioned JSON shape of `pplan bench --json` and `--report` ("pplan.bench/1"): one benchmark case, the
measured step and pplan's prediction of it (each a `pplan.schedule/1` block followed by the bench's own keys),
their difference with the checks, and, with --calibrate, the fitted GEMM efficiency. The shapes only:
`pplan.bench.document` fills them from a `pplan.bench.analysis.BenchResult`.

Times are in milliseconds (`time_unit`); byte counts are per GPU (per process on a CPU). Compatibility: fields
are only ever added within a major version; a rename or removal bumps the number.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, NonNegativeFloat, NonNegativeInt, PositiveInt

from pplan.bench.choices import DType, Mode
from pplan.documents.base import SCHEMA_KEY, Out
from pplan.documents.schedule import ScheduleDocument

BENCH_SCHEMA = "pplan.bench/1"


class BenchConfigOut(Out):
    schedule: str
    """The schedule's canonical name."""
    pp: PositiveInt
    """Pipeline ranks p (processes launched)."""
    vp: PositiveInt
    """Stages per rank v."""
    microbatches: PositiveInt
    """Micro-batches m per step."""
    runner: str
    """What ran the schedule: torch's schedule class, or pplan's action lists through torch's CSV runtime."""
    mode: Mode
    """sleep: blocks with fixed pass times; compute: real transformer layers."""
    model: str | None
    """Model profile the compute blocks were scaled from (null in sleep mode)."""
    hidden: PositiveInt
    """Hidden size h of the blocks (the message is b·s·h elements)."""
    seq_len: PositiveInt
    """Tokens per sequence s."""
    micro_batch: PositiveInt
    """Sequences per micro-batch b."""
    layers_per_stage: PositiveInt | None
    """Transformer layers per stage (null in sleep mode)."""
    f_ms: NonNegativeFloat | None
    """Sleep mode: forward time per stage (null in compute mode)."""
    i_ms: NonNegativeFloat | None
    """Sleep mode: input-gradient time per stage (null in compute mode)."""
    w_ms: NonNegativeFloat | None
    """Sleep mode: weight-gradient time per stage (null in compute mode)."""
    dtype: DType
    """Data type of the activations and messages."""
    steps: PositiveInt
    """Measured steps, after the warm-up."""
    warmup: NonNegativeInt
    """Steps run before the measured ones, not measured."""
    device: str
    """Where the ranks ran (cpu, or a CUDA device name)."""
    backend: str
    """torch.distributed's backend (gloo, nccl)."""


class MeasuredStep(ScheduleDocument):
    """The reported measured step as a `pplan.schedule/1` block (in-flight peaks and messages measured over the
    run), then what only a measurement has."""

    p2p_message_bytes: list[NonNegativeInt]
    """The distinct sizes of the messages sent between ranks."""
    activation_bytes_per_microbatch: list[NonNegativeInt]
    """Per stage: bytes autograd saved for one micro-batch (the largest over micro-batches)."""
    peak_activation_bytes_per_stage: list[NonNegativeFloat]
    """Per stage: most activation bytes held at once (the largest over the steps)."""
    peak_activation_bytes_per_rank: list[NonNegativeFloat]
    """Per rank: most activation bytes held at once, its stages summed (the largest over the steps)."""
    step_time_ms: NonNegativeFloat
    """The reported step's time (its makespan)."""
    reported_step: NonNegativeInt
    """Which measured step is shown (0-based): the one with the median bubble error."""
    step_times_ms: list[NonNegativeFloat]
    """Every measured step's time."""
    bubble_fraction_of_step_per_step: list[float]
    """Every measured step's bubble, as a fraction of the step."""
    hop_latency_ms: NonNegativeFloat
    """Per-hop latency the prediction charges: the trimmed mean hop gap less the dispatch time."""
    hop_latency_samples: NonNegativeInt
    """Hop gaps the hop latency is the trimmed mean of."""
    dispatch_ms: NonNegativeFloat
    """Mean dispatch gap: the runtime's work before each pass."""
    dispatch_samples: NonNegativeInt
    """Dispatch gaps the dispatch time is the mean of."""
    order_matches_plan: bool
    """Whether torch ran each rank's passes in pplan's order."""
    peak_device_bytes: list[NonNegativeInt | None]
    """Per rank: CUDA max allocated bytes (null without a GPU)."""
    peak_rss_bytes: list[NonNegativeInt | None]
    """Per rank: peak resident memory of the process (null where it cannot be read)."""
    grad_max_abs_error: NonNegativeFloat
    """Largest absolute difference of a gradient from a single-process reference."""
    grad_max_rel_error: NonNegativeFloat
    """Largest relative difference of a gradient from a single-process reference."""


class PredictionInputs(Out):
    f_ms: list[NonNegativeFloat]
    """Forward time per stage, from the reported step."""
    i_ms: list[NonNegativeFloat]
    """Input-gradient backward per stage (a full backward's time where the stage runs only B)."""
    w_ms: list[NonNegativeFloat]
    """Weight-gradient backward per stage."""
    hop_latency_ms: NonNegativeFloat
    """Per-hop latency charged on every cross-rank message (the measured one)."""
    dispatch_ms: NonNegativeFloat
    """Charged in front of every pass (and shown as idle)."""


class PredictedStep(ScheduleDocument):
    """pplan's simulation of the reported step from its own pass times, as a `pplan.schedule/1` block, then the
    predicted bytes and what the simulation was given."""

    p2p_message_bytes: list[NonNegativeInt]
    """The one message size pplan predicts: b·s·h·dtype."""
    peak_activation_bytes_per_stage: list[NonNegativeFloat]
    """Per stage: predicted most activation bytes held at once."""
    peak_activation_bytes_per_rank: list[NonNegativeFloat]
    """Per rank: predicted most activation bytes held at once, its stages summed."""
    step_time_ms: NonNegativeFloat
    """The predicted step's time (its makespan)."""
    bubble_fraction_of_step_per_step: list[float]
    """Every measured step's predicted bubble, as a fraction of the step."""
    inputs: PredictionInputs
    """The pass times and latencies the simulation was given."""


class BenchChecks(Out):
    in_flight_per_stage: bool
    """Measured peak micro-batches in flight per stage equal the predicted (exact)."""
    in_flight_per_rank: bool
    """Measured peak micro-batches in flight per rank equal the predicted (exact)."""
    activation_peak_bytes_per_stage: bool
    """Measured peak activation bytes per stage equal the predicted (exact)."""
    message_bytes: bool
    """The measured message sizes are the predicted one (exact)."""
    messages_per_step: bool
    """Measured messages per step equal the predicted count (exact)."""
    bubble_within_tolerance: bool
    """|bubble error| as a fraction of the step is within `bubble_tolerance`."""


class BenchError(Out):
    """Measured − predicted."""

    bubble_fraction_of_step: float
    """Bubble as a fraction of the step, measured − predicted."""
    bubble_fraction_of_ideal: float
    """Bubble as a fraction of the ideal compute, measured − predicted."""
    step_time_ms: float
    """Step time, measured − predicted."""
    step_time_relative: float
    """(measured − predicted) / predicted step time (0 when the predicted step is empty)."""
    peak_in_flight_per_stage: list[int]
    """Per stage: peak micro-batches in flight, measured − predicted."""
    peak_in_flight_microbatches: list[int]
    """Per rank: peak micro-batches in flight, measured − predicted."""
    p2p_messages_per_step: int
    """Cross-rank messages per step, measured − predicted."""
    bubble_tolerance: NonNegativeFloat
    """Largest |bubble error| (fraction of the step) the check accepts."""
    checks: BenchChecks
    """Each exact or tolerance check, by name."""
    ok: bool
    """Every check passed."""


class CalibrationOut(Out):
    hardware: str
    """The hardware profile fitted."""
    matmul: NonNegativeFloat
    """The fitted GEMM efficiency, a fraction of the profile's peak."""
    measured_busy_ms: NonNegativeFloat
    """Measured busy time of the step, every rank's passes summed."""
    out: str
    """Where the fitted profile was written."""


class BenchDocument(Out):
    schema_: str = Field(BENCH_SCHEMA, alias=SCHEMA_KEY)
    """The document's version."""
    time_unit: Literal["ms"] = "ms"
    """The unit of every time in the document."""
    config: BenchConfigOut
    """The benchmark case: schedule, sizes, mode, where it ran."""
    measured: MeasuredStep
    """The measured step."""
    predicted: PredictedStep
    """pplan's prediction of the same step."""
    error: BenchError
    """Measured − predicted, and the checks."""
    calibration: CalibrationOut | None = Field(None, exclude_if=lambda value: value is None)
    """With --calibrate only (the key is left out otherwise)."""
