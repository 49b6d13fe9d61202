"""Acceptance: torch.distributed.pipelining runs the CSV pplan exports, and gets the right gradients.

For every schedule pplan generates at p = 2, the compute-only CSV is loaded into torch's
`_PipelineScheduleRuntime` on two gloo ranks (forked processes, CPU), one training step runs on a small
`nn.Sequential` split into p·v `PipelineStage`s, and every parameter gradient is compared with a single-process
full-batch reference. torch==2.13.0 (CPU) is the pinned test dependency.
"""

from __future__ import annotations

import os
import socket
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from pplan.errors import ConfigError
from pplan.schedules import get_schedule, to_torch_csv


def _require_torch() -> None:
    """torch or a skip, imported when a test runs rather than at collection: the one torch-free test below is in
    the fast tier, and collecting it must not import torch (the rest are acceptance)."""
    pytest.importorskip("torch")
    pytest.importorskip("torch.distributed.pipelining")


P = 2
M = 4
HIDDEN = 8
ROWS_PER_MB = 2
CASES: list[tuple[str, int | None]] = [
    ("gpipe", None),
    ("1f1b", None),
    ("interleaved-1f1b", 2),
    ("interleaved-zb", 2),
    ("looped-bfs", 2),
    ("zb-h1", None),
    ("zb-h2", None),
    ("zbv", None),
    ("dualpipev", None),
]


def _blocks(num_stages: int) -> Any:
    import torch

    nn = torch.nn
    torch.manual_seed(1234)
    return nn.Sequential(*[nn.Sequential(nn.Linear(HIDDEN, HIDDEN), nn.Tanh()) for _ in range(num_stages)])


def _data() -> tuple[Any, Any]:
    import torch

    g = torch.Generator().manual_seed(99)
    x = torch.randn(M * ROWS_PER_MB, HIDDEN, generator=g)
    y = torch.randn(M * ROWS_PER_MB, HIDDEN, generator=g)
    return x, y


def _worker(rank: int, port: int, cases: list[tuple[str, str, list[int]]], out_dir: str) -> None:
    import copy

    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime

    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=P, timeout=timedelta(seconds=60)
    )
    try:
        x, y = _data()
        for name, csv_path, placement in cases:
            num_stages = len(placement)
            model = _blocks(num_stages)
            mine = [s for s, r in enumerate(placement) if r == rank]
            stages = [
                PipelineStage(copy.deepcopy(model[s]), s, num_stages, torch.device("cpu")) for s in mine
            ]
            sched = _PipelineScheduleRuntime(stages, n_microbatches=M, loss_fn=F.mse_loss)  # type: ignore[no-untyped-call]
            sched._load_csv(csv_path, format="compute_only")
            has_first, has_last = 0 in mine, num_stages - 1 in mine
            kwargs: dict[str, Any] = {}
            if has_last:
                kwargs["target"] = y
            if has_first:
                sched.step(x, **kwargs)
            else:
                sched.step(**kwargs)
            grads: dict[str, Any] = {}
            for st in stages:
                for pname, prm in st.submod.named_parameters():
                    assert prm.grad is not None, (name, st.stage_index, pname)  # every parameter was trained
                    grads[f"{st.stage_index}.{pname}"] = prm.grad.detach().clone()
            torch.save(grads, os.path.join(out_dir, f"{name}.rank{rank}.pt"))
            dist.barrier()
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def torch_grads(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Run every case in one two-rank launch; return {schedule name: {param name: grad}}."""
    _require_torch()
    import torch
    from torch.multiprocessing.spawn import start_processes

    tmp = tmp_path_factory.mktemp("torch_csv")
    cases = []
    for name, v in CASES:
        schedule = get_schedule(name, P, M, v)
        path = tmp / f"{name}.csv"
        path.write_text(to_torch_csv(schedule))
        cases.append((name, str(path), list(schedule.placement)))
    start_processes(  # type: ignore[no-untyped-call]
        _worker, args=(_free_port(), cases, str(tmp)), nprocs=P, join=True, start_method="fork"
    )
    out: dict[str, dict[str, Any]] = {}
    for name, _ in CASES:
        merged: dict[str, Any] = {}
        for r in range(P):
            merged.update(torch.load(Path(tmp) / f"{name}.rank{r}.pt"))
        out[name] = merged
    return out


def _reference(num_stages: int) -> dict[str, Any]:
    import torch.nn.functional as F

    model = _blocks(num_stages)
    x, y = _data()
    F.mse_loss(model(x), y).backward()  # type: ignore[no-untyped-call]
    return {n: p.grad.detach().clone() for n, p in model.named_parameters()}


@pytest.mark.acceptance
@pytest.mark.parametrize(("name", "v"), CASES)
def test_torch_runs_exported_csv_with_correct_gradients(
    torch_grads: dict[str, dict[str, Any]], name: str, v: int | None
) -> None:
    import torch

    schedule = get_schedule(name, P, M, v)
    ref = _reference(schedule.num_stages)
    got = torch_grads[name]
    assert set(got) == set(ref)
    for key, expected in ref.items():
        torch.testing.assert_close(got[key], expected, rtol=1e-5, atol=1e-6, msg=f"{name}: {key}")


def test_dualpipe_cannot_be_expressed_in_torch() -> None:
    """The bidirectional DualPipe runs two pipelines (and two parameter copies); torch's runtime runs one chain
    of stages 0..S−1, so the export refuses it rather than emit a CSV torch would misread."""
    with pytest.raises(ConfigError, match="one chain"):
        to_torch_csv(get_schedule("dualpipe", P, M))


@pytest.mark.acceptance
@pytest.mark.skip(
    reason="torch.distributed.pipelining has no bidirectional DualPipe: one chain of stages per run"
)
def test_dualpipe_in_torch() -> None:  # pragma: no cover - documents the gap in the report
    raise AssertionError


IR_CASES = [
    ("GPipe", "gpipe", 4, 8, None),
    ("1F1B", "1f1b", 4, 8, None),
    ("Interleaved1F1B", "interleaved-1f1b", 4, 8, 2),
    ("Interleaved1F1B", "interleaved-1f1b", 4, 6, 3),
    ("Interleaved1F1B", "interleaved-1f1b", 4, 10, 2),
    ("InterleavedZeroBubble", "interleaved-zb", 4, 8, 2),
    ("InterleavedZeroBubble", "interleaved-zb", 4, 10, 3),
    ("LoopedBFS", "looped-bfs", 4, 8, 2),
    ("ZBVZeroBubble", "zbv", 4, 8, 2),
    ("ZBVZeroBubble", "zbv", 4, 3, 2),
    ("DualPipeV", "dualpipev", 4, 8, 2),
    ("DualPipeV", "dualpipev", 2, 6, 2),
]


@pytest.mark.acceptance
@pytest.mark.parametrize(("torch_name", "name", "p", "m", "v"), IR_CASES)
def test_generators_match_torch_ir(torch_name: str, name: str, p: int, m: int, v: int | None) -> None:
    """Our lists equal torch's own compute IR (built without a process group), action for action.

    torch 2.13's Schedule1F1B IR is shifted by one micro-batch on the last rank (`3F1 … 3F8`, a known display
    bug; execution is hand-coded and unaffected), so that row is not compared.
    """
    import warnings

    _require_torch()
    from torch.distributed.pipelining._schedule_visualizer import get_schedule_ops

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ops = get_schedule_ops(torch_name, p, m, num_stages_per_rank=v)
    ours = get_schedule(name, p, m, v)
    compute = {"F", "I", "W", "B"}
    for rank, row in enumerate(ops):
        if torch_name == "1F1B" and rank == p - 1:
            continue
        theirs: list[str] = []
        for a in row:
            if a is None:
                continue
            subs = a.sub_actions if a.sub_actions is not None else (a,)
            theirs += [str(s) for s in subs if s.computation_type.value in compute]
        assert theirs == [str(a) for a in ours.actions[rank]], f"{name} rank {rank}"
