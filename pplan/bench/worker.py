"""One rank of a benchmark launch: build the stages, run the schedule with torch, measure it (torch).

For each case the rank builds the whole stack from the config's random seed, keeps the stages pplan's placement
gives it, wraps them in `PipelineStage`s and runs `warmup + steps` training steps with torch's schedule class or
torch's runtime loaded with pplan's CSV. Measurement works on `PipelineStage` *instances* (no change to torch):
- `forward_one_chunk`, `backward_one_chunk(full_backward=...)` and `backward_weight_one_chunk` are timed with
  `time.monotonic_ns()` (system-wide on one machine): F, B (full backward) or I (input gradient), and W. Waits
  for receives happen outside these methods, so each interval is the pass itself.
- the forward runs under `saved_tensors_hooks`: every tensor autograd saves for the backward is counted once by
  its own (view) size, parameters excluded; a `weakref.finalize` on each saved tensor records when autograd
  frees it, and the micro-batch leaves flight on that stage when the last one goes. Tensors that are the stage's
  own inputs or outputs (receive buffers torch keeps for the whole step) are counted in bytes but not followed.
- `get_fwd_send_ops` / `get_bwd_send_ops` give every message's peer and bytes.
After the steps each rank compares its gradients with a single-process reference of the whole stack (sleeps
off) on the whole batch, and rank 0 gathers every rank's `RankRecord`.

Launching: `launch` forks p processes on this machine (`torch.multiprocessing.start_processes`, fork) with a
`init_process_group` timeout, so a schedule bug fails instead of hanging; under `torchrun` (RANK, WORLD_SIZE,
MASTER_ADDR set) the calling process is one rank and rank 0 gets the records. gloo on CPU, NCCL when every rank
has a GPU.
"""

from __future__ import annotations

import logging
import os
import pickle
import resource
import socket
import tempfile
import time
import traceback
import weakref
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining import schedules as pp_schedules
from torch.multiprocessing.spawn import start_processes

from pplan.bench.blocks import build_stages, make_batch, set_sleeping
from pplan.bench.config import BenchConfig
from pplan.bench.records import OpRecord, RankRecord, SendRecord, StepRecord
from pplan.errors import PplanError
from pplan.schedules import to_torch_csv
from pplan.schedules.actions import Kind


class BenchRunError(PplanError):
    """A benchmark launch failed on some rank (the message carries that rank's last error line)."""


class _Recorder:
    """Instance-level instrumentation of one rank's `PipelineStage`s; `step` is the record being filled."""

    def __init__(self, stages: Sequence[PipelineStage], device: torch.device) -> None:
        self.step = StepRecord(0, 0)
        self.sync = device.type == "cuda"
        self._live: dict[tuple[int, int], int] = {}
        self._param_ptrs = {p.untyped_storage().data_ptr() for st in stages for p in st.submod.parameters()}
        for st in stages:
            self._wrap(st)

    def begin(self) -> StepRecord:
        self.step = StepRecord(0, 0)
        self._live = {}
        return self.step

    def _now(self) -> int:
        if self.sync:
            torch.cuda.synchronize()
        return time.monotonic_ns()

    def _op(self, stage: int, kind: Kind, mb: int, t0: int) -> None:
        self.step.ops.append(OpRecord(stage, kind, mb, t0, self._now()))

    def _freed(self, step: StepRecord, key: tuple[int, int]) -> None:
        if step is not self.step:  # a tensor of an earlier step (a warm-up) going away late
            return
        self._live[key] -= 1
        if self._live[key] == 0:
            step.released_ns[key] = time.monotonic_ns()

    def _wrap(self, st: PipelineStage) -> None:
        idx = st.stage_index
        fwd: Callable[..., Any] = st.forward_one_chunk
        bwd: Callable[..., Any] = st.backward_one_chunk
        wgt: Callable[..., Any] = st.backward_weight_one_chunk
        fwd_sends: Callable[[int], list[dist.P2POp]] = st.get_fwd_send_ops
        bwd_sends: Callable[[int], list[dist.P2POp]] = st.get_bwd_send_ops

        def forward_one_chunk(mb: int, *args: Any, **kwargs: Any) -> Any:
            step, key = self.step, (idx, mb)
            seen: set[tuple[int, int, torch.dtype]] = set()
            followed: list[weakref.ref[torch.Tensor]] = []
            nbytes = 0

            def pack(t: torch.Tensor) -> torch.Tensor:
                nonlocal nbytes
                if t.untyped_storage().data_ptr() in self._param_ptrs:
                    return t  # a weight, not an activation
                ident = (t.data_ptr(), t.numel(), t.dtype)
                if ident not in seen:
                    seen.add(ident)
                    nbytes += t.numel() * t.element_size()
                    followed.append(weakref.ref(t))
                return t

            t0 = self._now()
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                out = fwd(mb, *args, **kwargs)
            self._op(idx, "F", mb, t0)
            step.saved_bytes[key] = nbytes
            outputs, inputs = st.fwd_cache[mb]
            kept = {id(t) for t in (*outputs, *inputs) if isinstance(t, torch.Tensor)}
            live = [t for t in (r() for r in followed) if t is not None and id(t) not in kept]
            self._live[key] = len(live)
            for t in live:
                weakref.finalize(t, self._freed, step, key)
            return out

        def backward_one_chunk(mb: int, *args: Any, **kwargs: Any) -> Any:
            full = kwargs.get("full_backward", args[1] if len(args) > 1 else True)
            t0 = self._now()
            out = bwd(mb, *args, **kwargs)
            self._op(idx, "B" if full else "I", mb, t0)
            return out

        def backward_weight_one_chunk(mb: int, *args: Any, **kwargs: Any) -> Any:
            t0 = self._now()
            out = wgt(mb, *args, **kwargs)
            self._op(idx, "W", mb, t0)
            return out

        def log_sends(direction: str, mb: int, ops: list[dist.P2POp]) -> list[dist.P2POp]:
            for op in ops:
                size = op.tensor.numel() * op.tensor.element_size()
                self.step.sends.append(SendRecord(idx, mb, direction, int(op.peer), size))
            return ops

        setattr(st, "forward_one_chunk", forward_one_chunk)  # noqa: B010  instance-level wrappers
        setattr(st, "backward_one_chunk", backward_one_chunk)  # noqa: B010
        setattr(st, "backward_weight_one_chunk", backward_weight_one_chunk)  # noqa: B010
        setattr(st, "get_fwd_send_ops", lambda mb: log_sends("fwd", mb, fwd_sends(mb)))  # noqa: B010
        setattr(st, "get_bwd_send_ops", lambda mb: log_sends("bwd", mb, bwd_sends(mb)))  # noqa: B010


def _make_schedule(config: BenchConfig, stages: list[PipelineStage], workdir: str) -> Any:
    loss = F.mse_loss
    m = config.microbatches
    if config.torch_class is None:
        runtime = pp_schedules._PipelineScheduleRuntime(stages, n_microbatches=m, loss_fn=loss)  # type: ignore[no-untyped-call]
        path = Path(workdir) / f"{config.schedule}-p{config.pp}-m{m}-rank{dist.get_rank()}.csv"
        path.write_text(to_torch_csv(config.plan))
        runtime._load_csv(str(path), format="compute_only")
        return runtime
    cls = getattr(pp_schedules, config.torch_class)
    if issubclass(cls, pp_schedules.PipelineScheduleSingle):
        return cls(stages[0], n_microbatches=m, loss_fn=loss)
    return cls(stages, n_microbatches=m, loss_fn=loss)


def _reference_grads(
    config: BenchConfig, device: torch.device, mine: Sequence[int]
) -> dict[str, torch.Tensor]:
    """Gradients of the whole stack on the whole batch in this one process (sleeps off), for `mine`'s stages."""
    full = build_stages(config)
    set_sleeping(full, False)
    model = nn.Sequential(*full).to(device)
    x, y = make_batch(config, device)
    F.mse_loss(model(x), y).backward()  # type: ignore[no-untyped-call]
    out: dict[str, torch.Tensor] = {}
    for s in mine:
        for name, p in full[s].named_parameters():
            assert p.grad is not None
            out[f"{s}.{name}"] = p.grad.detach().float()
    return out


def _grad_errors(stages: Sequence[PipelineStage], ref: dict[str, torch.Tensor]) -> tuple[float, float]:
    worst_abs = worst_rel = 0.0
    for st in stages:
        for name, p in st.submod.named_parameters():
            expected = ref[f"{st.stage_index}.{name}"]
            got = p.grad.detach().float() if p.grad is not None else torch.zeros_like(expected)
            err = float((got - expected).abs().max())
            scale = float(expected.abs().max()) or 1.0
            worst_abs = max(worst_abs, err)
            worst_rel = max(worst_rel, err / scale)
    return worst_abs, worst_rel


def _clock_offset(hosts: list[str]) -> int:
    """Nanoseconds to add to this rank's clock to read rank 0's: 0 on one machine, else a barrier estimate."""
    if len(set(hosts)) == 1:
        return 0
    dist.barrier()
    now = time.monotonic_ns()
    stamps: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(stamps, now)
    return int(stamps[0]) - now


def run_case(config: BenchConfig, device: torch.device, workdir: str) -> RankRecord:
    """Run one case on this rank (the process group is up); return what this rank measured."""
    rank = dist.get_rank()
    mine = config.plan.stages_of(rank)
    modules = build_stages(config)
    stages = [PipelineStage(modules[s].to(device), s, config.num_stages, device) for s in mine]
    schedule = _make_schedule(config, stages, workdir)
    recorder = _Recorder(stages, device)
    x, y = make_batch(config, device)
    first, last = 0 in mine, config.num_stages - 1 in mine
    hosts: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(hosts, socket.gethostname())
    record = RankRecord(
        rank=rank,
        host=socket.gethostname(),
        stages=tuple(mine),
        clock_offset_ns=_clock_offset([str(h) for h in hosts]),
        device=str(device),
        backend=dist.get_backend(),
    )
    for k in range(config.warmup + config.steps):
        for st in stages:
            st.submod.zero_grad(set_to_none=True)
        step = recorder.begin()
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        dist.barrier()
        step.start_ns = time.monotonic_ns()
        kwargs: dict[str, Any] = {"return_outputs": False}
        if last:
            kwargs["target"] = y
        if first:
            schedule.step(x, **kwargs)
        else:
            schedule.step(**kwargs)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            step.peak_device_bytes = int(torch.cuda.max_memory_allocated(device))
        step.end_ns = time.monotonic_ns()
        if k >= config.warmup:
            record.steps.append(step)
    dist.barrier()
    ref = _reference_grads(config, device, mine)
    record.grad_max_abs_error, record.grad_max_rel_error = _grad_errors(stages, ref)
    if device.type == "cpu":
        record.peak_rss_bytes = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return record


def _device(world_size: int) -> tuple[torch.device, str]:
    local = int(os.environ.get("LOCAL_RANK", dist.get_rank() if dist.is_initialized() else 0))
    if torch.cuda.is_available() and torch.cuda.device_count() >= min(world_size, local + 1):
        torch.cuda.set_device(local)
        return torch.device("cuda", local), "nccl"
    return torch.device("cpu"), "gloo"


def run_rank(
    rank: int, world_size: int, init_method: str, configs: Sequence[BenchConfig], timeout_s: float
) -> list[list[RankRecord]] | None:
    """Join the process group, run every case, and return the gathered records on rank 0 (None elsewhere)."""
    torch.set_num_threads(1)
    os.environ.setdefault("LOCAL_RANK", str(rank))
    device, backend = _device(world_size)
    dist.init_process_group(
        backend,
        init_method=init_method,
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=timeout_s),
    )
    try:
        gathered: list[list[RankRecord]] = []
        with tempfile.TemporaryDirectory(prefix="pplan-bench-") as workdir:
            for config in configs:
                record = run_case(config, device, workdir)
                box: list[Any] | None = [None] * world_size if rank == 0 else None
                dist.gather_object(record, box, dst=0)
                if box is not None:
                    gathered.append([r for r in box if isinstance(r, RankRecord)])
        return gathered if rank == 0 else None
    finally:
        dist.destroy_process_group()


def _forked(
    rank: int, world_size: int, init_method: str, configs: Sequence[BenchConfig], timeout_s: float, out: str
) -> None:
    try:
        result = run_rank(rank, world_size, init_method, configs, timeout_s)
    except Exception as err:
        last = traceback.format_exception_only(err)[-1].strip()
        Path(f"{out}.rank{rank}.err").write_text(last)
        raise
    if result is not None:
        with open(out, "wb") as fh:
            pickle.dump(result, fh)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def under_torchrun() -> bool:
    """True when this process was started by torchrun (or any launcher that sets the env:// variables)."""
    return all(k in os.environ for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"))


def launch(configs: Sequence[BenchConfig]) -> list[list[RankRecord]] | None:
    """Run the cases (all with the same p) and return, per case, every rank's record (rank order).

    Under torchrun this process is one rank: rank 0 returns the records, the others None. Otherwise p processes
    are forked on this machine."""
    world_size = configs[0].pp
    timeout_s = max(c.timeout_s for c in configs)
    if any(c.pp != world_size for c in configs):
        raise BenchRunError("--pp", "the cases of one launch must share p", "launch each p separately")
    if under_torchrun():
        ws = int(os.environ["WORLD_SIZE"])
        if ws != world_size:
            raise BenchRunError(
                "--pp",
                f"torchrun started {ws} ranks for --pp {world_size}",
                f"use --nproc-per-node × nodes = {world_size}",
            )
        return run_rank(int(os.environ["RANK"]), ws, "env://", configs, timeout_s)
    init = f"tcp://127.0.0.1:{_free_port()}"
    spawn_log = logging.getLogger("torch.multiprocessing.spawn")
    level = spawn_log.level
    spawn_log.setLevel(logging.ERROR)  # its "terminating process" warnings would bury the one-line error
    try:
        with tempfile.TemporaryDirectory(prefix="pplan-bench-") as tmp:
            out = str(Path(tmp) / "records.pkl")
            try:
                start_processes(  # type: ignore[no-untyped-call]
                    _forked,
                    args=(world_size, init, list(configs), timeout_s, out),
                    nprocs=world_size,
                    join=True,
                    start_method="fork",
                )
            except Exception as err:
                errors = sorted(Path(tmp).glob("records.pkl.rank*.err"))
                where = f"rank {errors[0].name.split('.')[-2].removeprefix('rank')}" if errors else "a rank"
                message = errors[0].read_text() if errors else str(err).strip().splitlines()[-1]
                raise BenchRunError(
                    "bench", f"{where} failed: {message}", "check the schedule's rules, or raise --timeout"
                ) from err
            with open(out, "rb") as fh:
                records: list[list[RankRecord]] = pickle.load(fh)
    finally:
        spawn_log.setLevel(level)
    return records
