"""Time one transformer layer's kernel groups one at a time on a real device, beside what pplan predicts for each
(pplan/bench/components.py): which part of the pass-time model (GEMM efficiency by shape, the attention core, HBM
efficiency, the loss, the input embedding, the fixed cost per kernel) a miss against a published run comes from.

    python benchmarks/bench_components.py --device cuda --hardware h200-sxm-141gb --json OUT.json
    python benchmarks/bench_components.py --device cuda --cases llama --json OUT.json
    python benchmarks/bench_components.py --device cpu --cases tiny      # a smoke run, seconds on a CPU

Cases (`--cases readme`): the unpipelined rows of the Megatron-LM README's H100 table (1.7B t1, 7.1B t2, 16B t4,
32B t8; pplan's worst misses), its 177B at t8, and NVIDIA's DGX Cloud GPT-3 175B at t4 (s = 2048), one layer at
b = 1 (`--micro-batch` for others) as one GPU of that plan runs it (tensor-parallel shards, no collectives).
`--cases llama`: Llama 3 8B at t = 1 and 70B and 405B at t = 8, s = 8192.

Each case's whole layer is also run as the benchmark harness builds it (`pplan.bench.blocks.TransformerLayer`, one
rank's shard, `Case.layer`), with torch's fused RMSNorm where the model has RMSNorm: F (forward with autograd
recording) and B (input and weight gradients together), the bytes autograd saved (each storage once, weights
excluded, itemised by shape and dtype), the memory the forward left allocated and the peak during the backward, all
beside pplan's F, I + W and itemised activation bytes. Each group is timed with CUDA events
(on a CPU, the wall clock) as the median of `--reps` runs after warm-up; BF16 tensors, the loss in FP32 as
Megatron-Core computes it. Prints a Markdown table (measured, predicted, predicted / measured) and writes the figures
as JSON with the device, torch version and date. Needs torch (pip install "pplan[bench]").
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from pplan.bench.blocks import TransformerLayer
from pplan.bench.components import Case, Component
from pplan.bench.config import block_shape, scaled_model
from pplan.bench.timing import Timer, add_device_options, write_record
from pplan.profiles.catalog import load_hardware, load_model, load_published_runs
from pplan.profiles.model_spec import ModelSpec
from pplan.validation.published import row_model

README_ROWS = ("gpt-1.7b-readme", "gpt-7.1b-readme", "gpt-16b-readme", "gpt-32b-readme", "gpt-177b-readme")


def readme_cases(micro_batch: int = 1) -> list[Case]:
    """The README table's rows named in `README_ROWS` at their t, and DGX Cloud's GPT-3 175B at t = 4."""
    sets = {s["name"]: s for s in load_published_runs()["sets"]}
    data = sets["megatron-lm-readme-h100-weak-scaling"]
    seq = int(data["stated"]["seq_len"])
    cases = []
    for row in data["rows"]:
        if row["model"] in README_ROWS:
            model = row_model(data, row, load_model)
            label = f"{row['model']} t{row['tp']}" + (f" b{micro_batch}" if micro_batch > 1 else "")
            cases.append(Case(label, model, int(row["tp"]), micro_batch, seq))
    if micro_batch == 1:
        cases.append(Case("gpt3-175b t4 (dgxc)", load_model("gpt3-175b"), 4, 1, 2048))
    return cases


def llama_cases() -> list[Case]:
    """Llama 3 8B at t = 1, 70B and 405B at t = 8 (one rank's shard), b = 1, s = 8192."""
    return [
        Case("llama3-8b t1", load_model("llama3-8b"), 1, 1, 8192),
        Case("llama3-70b t8", load_model("llama3-70b"), 8, 1, 8192),
        Case("llama3-405b t8", load_model("llama3-405b"), 8, 1, 8192),
    ]


def tiny_cases() -> list[Case]:
    """gpt-1.7b scaled to h = 64 at t = 1 and 2: a CPU runs every group in seconds."""
    model = scaled_model(load_model("gpt-1.7b"), 64, 32, 1)
    return [Case("tiny t1", model, 1, 2, 32), Case("tiny t2", model, 2, 2, 32)]


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


@dataclass(frozen=True)
class LayerRun:
    """What `measure_layer` measured of one whole layer."""

    f_s: float
    b_s: float
    saved: list[tuple[int, str, str]]
    """Each storage autograd saved once: (bytes, shape, dtype), largest first."""
    forward_left_bytes: int
    backward_peak_bytes: int

    @property
    def saved_bytes(self) -> int:
        return sum(n for n, _, _ in self.saved)

    def as_dict(self) -> dict[str, object]:
        return {
            "f_s": self.f_s,
            "b_s": self.b_s,
            "saved_bytes": self.saved_bytes,
            "saved": [{"bytes": n, "shape": shape, "dtype": dtype} for n, shape, dtype in self.saved],
            "forward_left_bytes": self.forward_left_bytes,
            "backward_peak_bytes": self.backward_peak_bytes,
        }


def measure_layer(case: Case, shard: ModelSpec, dev: torch.device, timer: Timer) -> LayerRun:
    """One whole layer of `shard` (see the module doc): seconds of F and B, bytes saved, left and peak."""
    torch.manual_seed(0)
    layer = TransformerLayer(block_shape(shard))
    if shard.norm == "rmsnorm":  # the fused kernel a real stack runs (it saves its input and 1/rms per row)
        layer.norm1 = torch.nn.RMSNorm(shard.hidden_size, eps=1e-6)
        layer.norm2 = torch.nn.RMSNorm(shard.hidden_size, eps=1e-6)
    layer = layer.to(device=dev, dtype=torch.bfloat16)
    params = list(layer.parameters())
    weights = {p.untyped_storage().data_ptr() for p in params}
    x = _randn(dev, case.micro_batch, case.seq_len, shard.hidden_size).requires_grad_(True)
    saved: dict[int, tuple[int, str, str]] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        ptr = t.untyped_storage().data_ptr()
        if ptr not in weights:
            nbytes = t.untyped_storage().nbytes()
            if ptr not in saved or saved[ptr][0] < nbytes:
                saved[ptr] = (nbytes, "×".join(map(str, t.shape)), str(t.dtype).removeprefix("torch."))
        return t

    cuda = dev.type == "cuda"
    base = 0
    if cuda:
        torch.cuda.synchronize(dev)
        base = torch.cuda.memory_allocated(dev)
        torch.cuda.reset_peak_memory_stats(dev)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = layer(x)
    grad = torch.randn_like(y)
    left = peak = 0
    if cuda:
        torch.cuda.synchronize(dev)
        left = torch.cuda.memory_allocated(dev) - base
    torch.autograd.grad(y, [x, *params], grad)
    if cuda:
        torch.cuda.synchronize(dev)
        peak = torch.cuda.max_memory_allocated(dev) - base
    del y
    f_s = timer(lambda: layer(x))
    y = layer(x)
    b_s = timer(lambda: torch.autograd.grad(y, [x, *params], grad, retain_graph=True))
    return LayerRun(f_s, b_s, sorted(saved.values(), reverse=True), left, peak)


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
    parser.add_argument(
        "--hardware", default="h200-sxm-141gb", help="the profile whose predictions are shown"
    )
    parser.add_argument("--cases", choices=("readme", "llama", "tiny"), default="readme")
    parser.add_argument("--micro-batch", type=int, default=1, help="b of the readme cases")
    add_device_options(parser, reps=10)
    args = parser.parse_args(argv)
    timer = Timer.from_options(args)
    dev = timer.device
    hw = load_hardware(args.hardware)
    cases = {"readme": lambda: readme_cases(args.micro_batch), "llama": llama_cases, "tiny": tiny_cases}[
        args.cases
    ]()
    rows = []
    layers = []
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
    print()
    print(
        "| case (whole layer) | F ms | pplan F | B ms | pplan I+W | saved MiB | pplan MiB | left MiB | peak MiB |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for case in cases:
        pred = case.layer(hw)
        got = measure_layer(case, pred.model, dev, timer)
        layers.append({"case": case.label, **got.as_dict(), "predicted_f_s": pred.f_s, "predicted_i_s": pred.i_s,
                       "predicted_w_s": pred.w_s, "predicted_activation_bytes": pred.activation_bytes,
                       "predicted_items": dict(pred.items)})  # fmt: skip
        mib = 2**20
        print(
            f"| {case.label} | {got.f_s * 1e3:.3f} | {pred.f_s * 1e3:.3f} | {got.b_s * 1e3:.3f} "
            f"| {(pred.i_s + pred.w_s) * 1e3:.3f} | {got.saved_bytes / mib:.1f} | {pred.activation_bytes / mib:.1f} "
            f"| {got.forward_left_bytes / mib:.1f} | {got.backward_peak_bytes / mib:.1f} |"
        )
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    if args.json:
        write_record(args.json, dev, {"hardware_profile": hw.name, "components": rows, "layers": layers})


if __name__ == "__main__":
    main()
