"""How one measured benchmark case fills `pplan bench --json` ("pplan.bench/1", the shapes in
`pplan.documents.bench`): the measured and the predicted step, each a `pplan.schedule/1` block
(`pplan.schedules.document_fields`) followed by the bench's own keys, their difference with the checks, and the
--calibrate block when given."""

from __future__ import annotations

from pplan.bench.analysis import BUBBLE_TOLERANCE, BenchResult
from pplan.documents.bench import (
    BenchChecks,
    BenchConfigOut,
    BenchDocument,
    BenchError,
    CalibrationOut,
    MeasuredStep,
    PredictedStep,
    PredictionInputs,
)
from pplan.schedules.document_fields import schedule_fields


def bench_document(result: BenchResult, calibration: CalibrationOut | None = None) -> BenchDocument:
    """The `pplan bench --json` document of one measured case (with the --calibrate block when given)."""
    c = result.config
    mi, pi = result.measured_in_flight, result.predicted_in_flight
    m, p = result.measured, result.predicted
    sleep = c.mode == "sleep"
    measured = MeasuredStep.model_validate(
        {
            **schedule_fields(m),
            "peak_in_flight_per_stage": list(mi.per_stage),
            "peak_in_flight_microbatches": list(mi.per_rank),
            "p2p_messages_per_step": result.messages_per_step,
            "p2p_message_bytes": list(result.message_bytes),
            "activation_bytes_per_microbatch": list(result.activation_bytes_per_stage),
            "peak_activation_bytes_per_stage": list(mi.bytes_per_stage),
            "peak_activation_bytes_per_rank": list(mi.bytes_per_rank),
            "step_time_ms": m.makespan,
            "reported_step": result.reported_step,
            "step_times_ms": list(result.step_times_ms),
            "bubble_fraction_of_step_per_step": [b for b, _ in result.step_bubbles],
            "hop_latency_ms": result.hop_latency_ms,
            "hop_latency_samples": result.hop_samples,
            "dispatch_ms": result.dispatch_ms,
            "dispatch_samples": result.dispatch_samples,
            "order_matches_plan": result.order_matches,
            "peak_device_bytes": list(result.peak_device_bytes),
            "peak_rss_bytes": list(result.peak_rss_bytes),
            "grad_max_abs_error": result.grad_max_abs_error,
            "grad_max_rel_error": result.grad_max_rel_error,
        }
    )
    predicted = PredictedStep.model_validate(
        {
            **schedule_fields(p),
            "p2p_message_bytes": [result.predicted_message_bytes],
            "peak_activation_bytes_per_stage": list(pi.bytes_per_stage),
            "peak_activation_bytes_per_rank": list(pi.bytes_per_rank),
            "step_time_ms": p.makespan,
            "bubble_fraction_of_step_per_step": [b for _, b in result.step_bubbles],
            "inputs": PredictionInputs(
                f_ms=list(result.f_ms),
                i_ms=list(result.i_ms),
                w_ms=list(result.w_ms),
                hop_latency_ms=result.hop_latency_ms,
                dispatch_ms=result.dispatch_ms,
            ),
        }
    )
    return BenchDocument(
        config=BenchConfigOut(
            schedule=c.schedule,
            pp=c.pp,
            vp=c.plan.v,
            microbatches=c.microbatches,
            runner=c.runner,
            mode=c.mode,
            model=None if sleep else c.model_spec.name,
            hidden=c.hidden,
            seq_len=c.seq_len,
            micro_batch=c.micro_batch,
            layers_per_stage=None if sleep else c.layers_per_stage,
            f_ms=c.f_ms if sleep else None,
            i_ms=c.i_ms if sleep else None,
            w_ms=c.w_ms if sleep else None,
            dtype=c.dtype,
            steps=c.steps,
            warmup=c.warmup,
            device=result.device,
            backend=result.backend,
        ),
        measured=measured,
        predicted=predicted,
        error=BenchError(
            bubble_fraction_of_step=result.bubble_error,
            bubble_fraction_of_ideal=m.bubble_fraction_of_ideal - p.bubble_fraction_of_ideal,
            step_time_ms=m.makespan - p.makespan,
            step_time_relative=(m.makespan - p.makespan) / p.makespan if p.makespan else 0.0,
            peak_in_flight_per_stage=[a - b for a, b in zip(mi.per_stage, pi.per_stage, strict=True)],
            peak_in_flight_microbatches=[a - b for a, b in zip(mi.per_rank, pi.per_rank, strict=True)],
            p2p_messages_per_step=result.messages_per_step - p.p2p_messages,
            bubble_tolerance=BUBBLE_TOLERANCE,
            checks=BenchChecks(**result.checks()),
            ok=result.ok,
        ),
        calibration=calibration,
    )
