"""Close the loop: fit a hardware profile's GEMM efficiency to measured pass times, and write it as a profile.

`fit_matmul_to_measured(result, hardware)` takes a real-compute benchmark (`mode="compute"`) and finds the one number
e_matmul for which pplan's own pass-time model (`pplan.cost.passtime.layer_pass_times`: GEMM FLOPs from
`pplan.model.flops` over peak × e_matmul, the attention core at the profile's attention/matmul ratio, memory-bound
kernels at the profile's HBM bandwidth, a fixed overhead per kernel) reproduces the measured busy time of the
step: Σ over every pass the ranks ran of its modelled time = Σ of its measured time. The model time falls as
e_matmul rises, so bisection finds it. Everything the model does not separate (Python dispatch, the loss, what a
CPU does differently) lands in that one number, which is what a planner can use; the profile's other figures
are kept as they were. `hardware_toml` writes the fitted profile with its provenance in comments and in the
description, so `pplan explain --hardware FILE` plans with it. Pure: no torch, no files.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

from pplan.bench.analysis import BenchResult
from pplan.cost.passtime import layer_pass_times
from pplan.errors import ConfigError
from pplan.plan.shape import Shape
from pplan.profiles.hardware_spec import HardwareSpec


@dataclass(frozen=True)
class Calibration:
    """The fitted profile and what it was fitted to."""

    hardware: HardwareSpec
    matmul: float
    measured_s: float
    """Measured busy time of the step, every rank's passes summed."""
    passes: int
    """Layer-passes the fit covers (F, I and W of every layer of every micro-batch)."""
    note: str
    """Where the figure came from, in one line."""


def _shape(result: BenchResult) -> Shape:
    c = result.config
    return Shape(
        tp=1,
        cp=1,
        seq_len=c.seq_len,
        micro_batch=c.micro_batch,
        sequence_parallel=False,
        flash_attention=True,
        recompute="none",
        activation_model="itemised",
    )


def model_step_s(result: BenchResult, hw: HardwareSpec) -> float:
    """pplan's modelled busy time for the benchmark's step: m micro-batches × every layer × (F + I + W)."""
    c = result.config
    layer = layer_pass_times(c.model_spec, hw, _shape(result))
    layers = c.num_stages * c.layers_per_stage
    return c.microbatches * layers * (layer.f_s + layer.i_s + layer.w_s)


def fit_matmul_to_measured(result: BenchResult, hardware: HardwareSpec) -> Calibration:
    """The GEMM efficiency that makes pplan's pass-time model match the measured step (see the module doc)."""
    c = result.config
    if c.mode != "compute":
        raise ConfigError("--calibrate", "needs real blocks, not sleeps", "use --mode compute")
    measured_s = sum(result.measured.busy_per_rank) / 1e3
    lo, hi = 1e-12, 1.0
    if model_step_s(result, hardware.with_efficiency(matmul=hi, calibrated=True)) > measured_s:
        raise ConfigError(
            "--hardware",
            f"the measured passes ({measured_s * 1e3:.3g} ms) run faster than {hardware.name} at 100 % GEMM "
            "efficiency would",
            "give the profile of the device the benchmark ran on",
        )
    for _ in range(200):
        mid = (lo * hi) ** 0.5
        if model_step_s(result, hardware.with_efficiency(matmul=mid, calibrated=True)) > measured_s:
            lo = mid
        else:
            hi = mid
        if hi / lo < 1 + 1e-9:
            break
    matmul = hi
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    note = (
        f"fitted by `pplan bench --calibrate` on {when}: {result.device} ({result.backend}), "
        f"{c.model_spec.name} (h={c.hidden}, {c.layers_per_stage} layer(s) per stage, s={c.seq_len}, "
        f"b={c.micro_batch}, {c.dtype}), {c.schedule} p={c.pp} m={c.microbatches}; measured busy "
        f"{measured_s * 1e3:.4g} ms over {c.microbatches * c.num_stages * c.layers_per_stage * 3} layer-passes"
    )
    fitted = hardware.with_efficiency(matmul=matmul, calibrated=True)
    fitted = fitted.model_copy(
        update={
            "name": f"{hardware.name}-bench",
            "description": f"{hardware.description or hardware.name}; GEMM efficiency fitted by pplan bench",
        }
    )
    return Calibration(
        hardware=fitted,
        matmul=matmul,
        measured_s=measured_s,
        passes=c.microbatches * c.num_stages * c.layers_per_stage * 3,
        note=note,
    )


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(x) for x in value) + "]"
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def hardware_toml(cal: Calibration) -> str:
    """The fitted profile as TOML a user can plan with (`load_hardware` reads it back)."""
    data = cal.hardware.model_dump(exclude_none=True, exclude={"calibration"})
    lines = [
        f"# {cal.hardware.name}: {cal.note}.",
        "# Only efficiency.matmul was fitted (pplan's pass-time model against the measured passes); every other",
        "# figure is the source profile's. The source's [calibration] (its error band on public end-to-end runs)",
        "# does not describe this fit and is left out: pplan marks predictions with this profile as extrapolated.",
    ]
    tables = {k: v for k, v in data.items() if isinstance(v, dict)}
    for key, value in data.items():
        if key not in tables:
            lines.append(f"{key} = {_toml_value(value)}")
    for name, table in tables.items():
        lines.append("")
        lines.append(f"[{name}]")
        for key, value in table.items():
            if name == "efficiency" and key == "matmul":
                lines.append("# fitted (see the top of the file)")
            lines.append(f"{key} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"
