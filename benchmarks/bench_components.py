"""Time one transformer layer's kernel groups one at a time on a real device, beside what pplan predicts for each
(pplan/bench/components.py): which part of the pass-time model (GEMM efficiency by shape, the attention core, HBM
efficiency, the loss, the input embedding, the fixed cost per kernel) a miss against a published run comes from.

    python benchmarks/bench_components.py --device cuda --hardware h200-sxm-141gb --json OUT.json
    python benchmarks/bench_components.py --device cpu --cases tiny      # a smoke run, seconds on a CPU

Cases (`--cases readme`): the unpipelined rows of the Megatron-LM README's H100 table (1.7B t1, 7.1B t2, 16B t4,
32B t8; pplan's worst misses), its 177B at t8, and NVIDIA's DGX Cloud GPT-3 175B at t4 (s = 2048), one layer at
b = 1 as one GPU of that plan runs it (tensor-parallel shards, no collectives). Each group is timed with CUDA events
(on a CPU, the wall clock) as the median of `--reps` runs after warm-up; BF16 tensors, the loss in FP32 as
Megatron-Core computes it. Prints a Markdown table (measured, predicted, predicted / measured) and writes the figures
as JSON with the device, torch version and date. Needs torch (pip install "pplan[bench]").
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from pplan.bench.components import Case, Component
from pplan.bench.config import scaled_model
from pplan.profiles.catalog import load_hardware, load_model, load_published_runs
from pplan.profiles.specs import ModelSpec
from pplan.validation.published import row_model

README_ROWS = ("gpt-1.7b-readme", "gpt-7.1b-readme", "gpt-16b-readme", "gpt-32b-readme", "gpt-177b-readme")


def readme_cases() -> list[Case]:
    """The README table's rows named in `README_ROWS` at their t, and DGX Cloud's GPT-3 175B at t = 4."""
    sets = {s["name"]: s for s in load_published_runs()["sets"]}
    data = sets["megatron-lm-readme-h100-weak-scaling"]
    seq = int(data["stated"]["seq_len"])
    cases = []
    for row in data["rows"]:
        if row["model"] in README_ROWS:
            model = row_model(data, row, load_model)
            cases.append(Case(f"{row['model']} t{row['tp']}", model, int(row["tp"]), 1, seq))
    cases.append(Case("gpt3-175b t4 (dgxc)", load_model("gpt3-175b"), 4, 1, 2048))
    return cases


def tiny_cases() -> list[Case]:
    """gpt-1.7b scaled to h = 64 at t = 1 and 2: a CPU runs every group in seconds."""
    model = scaled_model(load_model("gpt-1.7b"), 64, 32, 1)
    return [Case("tiny t1", model, 1, 2, 32), Case("tiny t2", model, 2, 2, 32)]


class Timer:
    """Median seconds of a callable on `device`: CUDA events on a GPU, the wall clock elsewhere."""

    def __init__(self, device: torch.device, reps: int, warmup: int) -> None:
        self.device, self.reps, self.warmup = device, reps, warmup

    def __call__(self, fn: Callable[[], object]) -> float:
        for _ in range(self.warmup):
            fn()
        times: list[float] = []
        for _ in range(self.reps):
            if self.device.type == "cuda":
                start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
                end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
                start.record()
                fn()
                end.record()
                torch.cuda.synchronize()
                times.append(float(start.elapsed_time(end)) / 1e3)
            else:
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
        return statistics.median(times)


def _randn(dev: torch.device, *shape: int, dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    return torch.randn(*shape, device=dev, dtype=dtype)


def gemm_op(dev: torch.device, dims: tuple[int, ...]) -> Callable[[], object]:
    """An M×K by K×N BF16 product (the F, I and W GEMMs are all of this form, `Component.dims`)."""
    m, k, n = dims
    a, b = _randn(dev, m, k), _randn(dev, k, n)
    return lambda: a @ b


def attention_op(dev: torch.device, dims: tuple[int, ...], backward: bool) -> Callable[[], object]:
    """The causal attention core (torch's fused scaled_dot_product_attention), forward or backward."""
    b, heads, kv, s, d = dims
    q = _randn(dev, b, heads, s, d).requires_grad_(backward)
    k = _randn(dev, b, kv, s, d).requires_grad_(backward)
    v = _randn(dev, b, kv, s, d).requires_grad_(backward)
    gqa = kv != heads
    if not backward:
        return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
    grad = torch.randn_like(out)
    return lambda: torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)


def memory_bound_op(
    dev: torch.device, dims: tuple[int, ...], model: ModelSpec, backward: bool
) -> Callable[[], object]:
    """The layer's memory-bound kernels pplan counts: two norms and two residual adds on q/sp rows of h, and the
    activation on q rows of the MLP's inner width (SwiGLU: silu(gate)·up), forward or backward."""
    rows, h, q, width = dims
    x = _randn(dev, rows, h).requires_grad_(backward)
    r = _randn(dev, rows, h)
    weight = torch.ones(h, device=dev, dtype=torch.bfloat16, requires_grad=backward)

    def norm(z: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(z, (h,), weight) if model.norm == "rmsnorm" else F.layer_norm(z, (h,), weight)

    swiglu = model.mlp == "swiglu"
    gate = _randn(dev, q, width).requires_grad_(backward)
    up = _randn(dev, q, width).requires_grad_(backward) if swiglu else None

    def forward() -> tuple[torch.Tensor, ...]:
        y1 = norm(x)
        y2 = norm(x + r)
        act = F.silu(gate) * up if up is not None else F.gelu(gate)
        return y1, y2, x + r, act

    if not backward:
        return forward
    outs = forward()
    grads = [torch.randn_like(o) for o in outs]
    inputs = [x, gate] + ([up] if up is not None else [])
    return lambda: torch.autograd.grad(outs, inputs, grads, retain_graph=True)


def loss_op(dev: torch.device, dims: tuple[int, ...], backward: bool) -> Callable[[], object]:
    """Megatron-Core's vocabulary-parallel cross-entropy as it runs on one rank, forward (FP32 cast, max,
    subtract, exp, sum, divide) or backward (scale the softmax, cast to BF16)."""
    q, _, vocab = dims
    logits = _randn(dev, q, vocab)
    softmax = torch.rand(q, vocab, device=dev, dtype=torch.float32)
    scale = torch.rand(q, 1, device=dev, dtype=torch.float32)

    def forward() -> torch.Tensor:
        z = logits.float()
        z -= z.max(dim=-1, keepdim=True)[0]
        torch.exp(z, out=z)
        return z.div_(z.sum(dim=-1, keepdim=True))

    def backward_() -> torch.Tensor:
        return softmax.mul(scale).to(torch.bfloat16)

    return backward_ if backward else forward


def embedding_op(dev: torch.device, dims: tuple[int, ...], backward: bool) -> Callable[[], object]:
    """The input embedding on one rank: the lookup of q rows of a V/t × h BF16 table (F), or its weight gradient
    (W): PyTorch's dense embedding backward, then the add into an FP32 main gradient (Megatron-Core's DDP hook)."""
    q, h, vocab = dims
    table = _randn(dev, vocab, h)
    ids = torch.randint(0, vocab, (q,), device=dev)
    grad_out = _randn(dev, q, h)
    main_grad = torch.zeros(vocab, h, device=dev, dtype=torch.float32)

    def forward() -> torch.Tensor:
        return F.embedding(ids, table)

    def backward_() -> torch.Tensor:
        grad = torch.ops.aten.embedding_dense_backward(grad_out, ids, vocab, -1, False)
        return main_grad.add_(grad)

    return backward_ if backward else forward


def launch_op(dev: torch.device) -> Callable[[], object]:
    """One kernel on one element, 100 times back to back: the time of each is the fixed cost per kernel."""
    x = torch.zeros(1, device=dev)

    def run() -> None:
        for _ in range(100):
            x.add_(1.0)

    return run


def measure(component: Component, model: ModelSpec, dev: torch.device, timer: Timer) -> float:
    """Median seconds of `component` on `dev`."""
    c = component
    if c.kind == "gemm":
        return timer(gemm_op(dev, c.dims))
    if c.kind == "attention":
        return timer(attention_op(dev, c.dims, c.pass_ == "I"))
    if c.kind == "memory-bound":
        return timer(memory_bound_op(dev, c.dims, model, c.pass_ == "I"))
    if c.kind == "logits":
        q, h, vocab = c.dims
        return timer(gemm_op(dev, (q, h, vocab)))
    if c.kind == "loss":
        return timer(loss_op(dev, c.dims, c.pass_ == "I"))
    if c.kind == "embedding":
        return timer(embedding_op(dev, c.dims, c.pass_ == "W"))
    return timer(launch_op(dev)) / 100


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda or cpu")
    parser.add_argument(
        "--hardware", default="h200-sxm-141gb", help="the profile whose predictions are shown"
    )
    parser.add_argument("--cases", choices=("readme", "tiny"), default="readme")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args(argv)
    dev = torch.device(args.device)
    hw = load_hardware(args.hardware)
    timer = Timer(dev, args.reps, args.warmup)
    cases = readme_cases() if args.cases == "readme" else tiny_cases()
    rows = []
    print("| case | component | dims | measured ms | pplan ms | pplan / measured |")
    print("|---|---|---|---|---|---|")
    for case in cases:
        for c in case.components(hw):
            measured = measure(c, case.model, dev, timer)
            rows.append({"case": c.case, "component": c.name, "dims": list(c.dims), "measured_s": measured,
                         "predicted_s": c.predicted_s})  # fmt: skip
            ratio = c.predicted_s / measured if measured > 0 else float("nan")
            dims = "×".join(map(str, c.dims))
            print(
                f"| {c.case} | {c.name} | {dims} | {measured * 1e3:.4f} | {c.predicted_s * 1e3:.4f} | {ratio:.3f} |"
            )
            if dev.type == "cuda":
                torch.cuda.empty_cache()
    if args.json:
        name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
        doc = {
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "device": name,
            "torch": torch.__version__,
            "hardware_profile": hw.name,
            "components": rows,
        }
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
