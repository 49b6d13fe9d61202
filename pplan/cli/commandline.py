"""The command lines pplan prints for a plan: `explain_command`, the `pplan explain` line that shows one in full
(recommend's table and document, size's points)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pplan.plan.knobs import DEFAULT_RECOMPUTE_MODULES
from pplan.profiles.stacks import DEFAULT_STACK

if TYPE_CHECKING:
    from pplan.plan.configuration import PlanRequest


def explain_command(model: str, hardware: str, req: PlanRequest) -> str:
    """The `pplan explain` command line that shows `req` in full."""
    args = [
        "pplan explain", f"--model {model}", f"--hardware {hardware}", f"--gpus {req.gpus}",
        f"--global-batch {req.global_batch}", f"--tp {req.tp}", f"--pp {req.pp}", f"--cp {req.cp}",
        f"--micro-batch {req.micro_batch}", f"--schedule {req.schedule}", f"--recompute {req.recompute}",
        f"--zero-stage {req.zero_stage}", f"--grad-dtype {req.grad_dtype}",
    ]  # fmt: skip
    if req.recompute_layers is not None:
        args += [f"--recompute-method {req.recompute_method}", f"--recompute-layers {req.recompute_layers}"]
    if req.recompute == "selective" and tuple(req.recompute_modules) != DEFAULT_RECOMPUTE_MODULES:
        args.append(f"--recompute-modules {','.join(req.recompute_modules)}")
    if req.seq_len is not None:
        args.append(f"--seq-len {req.seq_len}")
    if req.vp is not None:
        args.append(f"--vp {req.vp}")
    if req.first_stage_layers is not None:
        args.append(f"--first-stage-layers {req.first_stage_layers}")
    if req.last_stage_layers is not None:
        args.append(f"--last-stage-layers {req.last_stage_layers}")
    if req.offload_modules:
        args.append(f"--offload-modules {','.join(req.offload_modules)}")
    if req.shard_group is not None:
        args.append(f"--shard-group {req.shard_group}")
    if not req.reshard_after_forward:
        args.append("--no-reshard-after-forward")
    if not req.overlap_p2p_comm:
        args.append("--no-overlap-p2p-comm")
    if req.tp_comm_overlap and req.tp > 1:
        args.append("--tp-comm-overlap")
    if req.stack != DEFAULT_STACK:
        args.append(f"--stack {req.stack}")
    if req.ep > 1:
        args.append(f"--ep {req.ep}")
    if req.precision != "bf16":
        args.append(f"--precision {req.precision}")
    if req.memory_headroom:
        args.append(f"--headroom {req.memory_headroom:g}")
    if req.jitter:
        args.append(f"--jitter {req.jitter:g}")
    return " ".join(args)
