"""One transformer layer taken apart: each kernel group pplan costs, with the seconds pplan predicts for it, for a
device run to time one at a time (benchmarks/bench_components.py) — which part of pplan's pass-time model a miss
against a published run comes from.

A `Case` is one layer of a dense model at one tensor-parallel degree t, micro-batch b and sequence s, as one GPU
of that plan runs it (tokens q = b·s; the shards' widths, no collective). Its `components`:
- the four Linear GEMMs (QKV, projection, MLP first and second) forward (F), input gradient (I: dY·Wᵀ) and weight
  gradient (W: Xᵀ·dY), each an M×K by K×N product (`dims` = (M, K, N)); pplan gives all three the forward's
  seconds (`pplan.cost.tensor_parallel.layer_gemms_s`: FLOPs / (peak · e_matmul) + one kernel overhead);
- the attention core F and I (`dims` = (b, heads/t, kv heads/t, s, head width); flash attention, causal);
- the memory-bound kernels F and I: the two norms and residual adds on q/sp rows of h, and the activation on q rows
  of the MLP's inner width / t (`dims` = (q/sp, h, q, inner/t));
- the output layer's GEMM F and the loss F and I (`dims` = (q, h, V/t)): Megatron-Core's vocabulary-parallel
  cross-entropy over FP32 logits (`pplan.cost.passtime.LOSS_BYTES`);
- the input embedding's lookup F and its weight gradient W (`dims` = (q, h, V/t)): the dense V/t × h gradient
  added into an FP32 main gradient, as Megatron-Core runs it (`pplan.cost.passtime.embedding_pass_times`);
- one empty kernel (`launch`): the fixed cost pplan adds per kernel (`efficiency.kernel_overhead_us`).
`Case.layer` is the whole layer as the benchmark harness builds it (`pplan.bench.blocks.TransformerLayer` at real
widths): one tensor-parallel rank's shard taken as a model of its own (`shard_model`: heads, KV heads and FFN
width over t, no sequence parallelism, no rotary embedding, QK-norm or dropout, which that layer does not run),
with pplan's F, I and W seconds and its itemised activation bytes (16-bit activations) for one micro-batch.
Predictions come from the pass-time model's own functions (`layer_gemms_s`, `layer_pass_times`,
`output_pass_times`, `embedding_pass_times`), never a copy of them. Pure: no torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pplan.cost.passtime import (
    embedding_pass_times,
    layer_pass_times,
    output_pass_times,
    tensor_parallel_mlp_width,
)
from pplan.cost.tensor_parallel import layer_gemms_s
from pplan.errors import ConfigError
from pplan.model.activations import itemised_layer
from pplan.plan.configuration import make_plan
from pplan.plan.records import PlanRequest
from pplan.profiles.hardware_spec import HardwareSpec
from pplan.profiles.model_spec import ModelSpec

Kind = Literal["gemm", "attention", "memory-bound", "logits", "loss", "embedding", "launch"]
Pass = Literal["F", "I", "W"]


@dataclass(frozen=True, slots=True)
class Component:
    """One kernel group of a case: what it computes (`kind`, `pass_`, `dims`) and the seconds pplan predicts."""

    case: str
    name: str
    kind: Kind
    pass_: Pass
    dims: tuple[int, ...]
    predicted_s: float


@dataclass(frozen=True, slots=True)
class LayerPrediction:
    """pplan's figures for one whole layer of one micro-batch on one GPU (`Case.layer`)."""

    model: ModelSpec
    """The shard the layer is built from (`shard_model`)."""
    f_s: float
    i_s: float
    w_s: float
    activation_bytes: int
    """pplan's itemised activations of the layer (`pplan.model.activations.itemised_layer`)."""
    items: tuple[tuple[str, int], ...]


def shard_model(model: ModelSpec, tp: int) -> ModelSpec:
    """One tensor-parallel rank's layer of `model` as a model of its own: a/t query heads, max(1, g/t) KV heads
    (Megatron replicates KV heads when t > g), FFN width / t, the head width kept; no rotary embedding, QK-norm or
    dropout (the harness's `TransformerLayer` runs none)."""
    heads, kv = model.num_attention_heads, model.kv_heads
    if heads % tp or model.ffn_hidden_size % tp:
        raise ConfigError(
            "--tp",
            f"{model.name} has {heads} heads and FFN {model.ffn_hidden_size}",
            "use a t that divides both",
        )
    return model.model_copy(
        update={
            "name": f"{model.name}-t{tp}-shard",
            "num_attention_heads": heads // tp,
            "num_kv_heads": max(1, kv // tp),
            "head_dim": model.head_size,
            "ffn_hidden_size": model.ffn_hidden_size // tp,
            "dropout": False,
            "position_embedding": "none",
            "qk_norm": False,
        }
    )


@dataclass(frozen=True, slots=True)
class Case:
    """One layer of `model` as one GPU of a plan at tensor parallel `tp` runs it (sequence parallel for t > 1)."""

    label: str
    model: ModelSpec
    tp: int
    micro_batch: int
    seq_len: int

    def layer(self, hw: HardwareSpec) -> LayerPrediction:
        """The whole layer as the harness builds it (`shard_model` at t = 1): pplan's F, I, W seconds and
        itemised activation bytes for one micro-batch."""
        shard = shard_model(self.model, self.tp)
        req = PlanRequest(
            gpus=1,
            global_batch=self.micro_batch,
            micro_batch=self.micro_batch,
            seq_len=self.seq_len,
            recompute="none",
        )
        shape = make_plan(shard, req).shape
        times = layer_pass_times(shard, hw, shape)
        items = itemised_layer(shard, shape)
        kept = tuple((name, round(nbytes)) for name, nbytes in items.items)
        return LayerPrediction(shard, times.f_s, times.i_s, times.w_s, sum(b for _, b in kept), kept)

    def components(self, hw: HardwareSpec) -> tuple[Component, ...]:
        """Every kernel group of the layer, the output layer, the loss and the input embedding, with pplan's
        predicted seconds on `hw`."""
        model = self.model
        if model.moe is not None or model.mla is not None:
            raise ConfigError(
                "--model", f"{model.name} is routed or uses MLA", "component cases take dense models"
            )
        t, b, s = self.tp, self.micro_batch, self.seq_len
        req = PlanRequest(
            gpus=t, global_batch=b, micro_batch=b, tp=t, seq_len=s, recompute="none", sequence_parallel=t > 1
        )
        shape = make_plan(model, req).shape
        q, h, d = b * s, model.hidden_size, model.head_size
        heads, kv = model.num_attention_heads, model.kv_heads
        inner = tensor_parallel_mlp_width(model) * (2 if model.mlp == "swiglu" else 1)
        gemms = layer_gemms_s(model, hw, shape)
        shapes = {
            "qkv": (q, h, (heads + 2 * kv) * d // t),
            "proj": (q, heads * d // t, h),
            "fc1": (q, h, inner // t),
            "fc2": (q, tensor_parallel_mlp_width(model) // t, h),
        }
        out: list[Component] = []
        for (name, (m, k, n)), seconds in zip(shapes.items(), gemms, strict=True):
            passes: tuple[tuple[Pass, tuple[int, ...]], ...] = (
                ("F", (m, k, n)),
                ("I", (m, n, k)),
                ("W", (k, m, n)),
            )
            out += [Component(self.label, f"{name} {p}", "gemm", p, dims, seconds) for p, dims in passes]
        layer = layer_pass_times(model, hw, shape)
        ends = output_pass_times(model, hw, shape)
        sp = t if shape.sequence_parallel else 1
        attention = (b, heads // t, max(1, kv // t), s, d)
        rows = (q // sp, h, q, tensor_parallel_mlp_width(model) // t)
        vocab = (q, h, model.vocab_size // t)
        both: tuple[tuple[Pass, dict[str, float], dict[str, float]], ...] = (
            ("F", dict(layer.f), dict(ends.f)),
            ("I", dict(layer.i), dict(ends.i)),
        )
        for p, got, end in both:
            out.append(Component(self.label, f"attention {p}", "attention", p, attention, got["attention"]))
            out.append(
                Component(self.label, f"memory-bound {p}", "memory-bound", p, rows, got["memory-bound"])
            )
            out.append(Component(self.label, f"loss {p}", "loss", p, vocab, end["loss"]))
        out.append(Component(self.label, "logits F", "logits", "F", vocab, dict(ends.f)["logits"]))
        embedding = embedding_pass_times(model, hw, shape)  # the FP32 main gradient
        out.append(
            Component(self.label, "embedding F", "embedding", "F", vocab, dict(embedding.f)["embedding"])
        )
        out.append(
            Component(self.label, "embedding W", "embedding", "W", vocab, dict(embedding.w)["embedding"])
        )
        out.append(
            Component(self.label, "launch", "launch", "F", (), hw.efficiency.kernel_overhead_us * 1e-6)
        )
        return tuple(out)
