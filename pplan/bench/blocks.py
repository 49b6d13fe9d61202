"""The layers the benchmark pipelines: real transformer layers, and sleep blocks with fixed pass times (torch).

- `TransformerLayer`: pre-norm attention (fused QKV projection, grouped-query `scaled_dot_product_attention`,
  causal) and MLP (GeLU, SwiGLU or squared ReLU), LayerNorm or RMSNorm, biases as the profile says; shaped by
  `config.BlockShape` (a model profile scaled down).
- `SleepBlock`: y = x·W built from two autograd nodes so that torch's split backward runs each sleep once. The
  first node computes x·W from a detached W, sleeps t_F in its forward and t_I in its backward and returns the
  input gradient only; the second gets a detached x, returns zeros in the forward and sleeps t_W in its backward,
  returning the weight gradient only. `stage_backward_input` (I) therefore runs only the first node's backward,
  `stage_backward_weight` (W) only the second's, and a full backward (B) both: I + W. One node would not do:
  a custom Function sees the same `needs_input_grad` in both partial backwards and would sleep twice.
  `SleepBlock.sleeping = False` turns the sleeps off (the single-process reference uses it).

`build_stages` makes the whole stack deterministically from a seed (every rank builds the same weights and keeps
its own stages); `make_batch` the input and target. Imported only by the worker, never by `import pplan`.
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from pplan.bench.config import BenchConfig, BlockShape, block_shape

TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


class _SleepX(torch.autograd.Function):
    """y = x·W with W a constant: sleeps t_F forward, t_I backward; returns dX only."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w_const: torch.Tensor, block: SleepBlock) -> torch.Tensor:
        ctx.save_for_backward(w_const)
        ctx.block = block
        block.nap(block.f_s)
        return x @ w_const

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        (w,) = ctx.saved_tensors
        ctx.block.nap(ctx.block.i_s)
        return grad @ w.t(), None, None


class _SleepW(torch.autograd.Function):
    """Zeros shaped like x·W with x a constant: sleeps t_W backward; returns dW only."""

    @staticmethod
    def forward(ctx: Any, x_const: torch.Tensor, w: torch.Tensor, block: SleepBlock) -> torch.Tensor:
        ctx.save_for_backward(x_const)
        ctx.block = block
        return x_const.new_zeros((*x_const.shape[:-1], w.shape[1]))

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[None, torch.Tensor, None]:
        (x,) = ctx.saved_tensors
        ctx.block.nap(ctx.block.w_s)
        flat_x = x.reshape(-1, x.shape[-1])
        return None, flat_x.t() @ grad.reshape(-1, grad.shape[-1]), None


class SleepBlock(nn.Module):
    """A linear map whose forward, input-gradient and weight-gradient passes take fixed times (seconds)."""

    def __init__(self, hidden: int, f_s: float, i_s: float, w_s: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.eye(hidden) + 0.02 * torch.randn(hidden, hidden))
        self.f_s, self.i_s, self.w_s = f_s, i_s, w_s
        self.sleeping = True

    def nap(self, seconds: float) -> None:
        if self.sleeping and seconds > 0:
            time.sleep(seconds)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.weight
        a: torch.Tensor = _SleepX.apply(x, w.detach(), self)  # type: ignore[no-untyped-call]
        b: torch.Tensor = _SleepW.apply(x.detach(), w, self)  # type: ignore[no-untyped-call]
        return a + b


class RMSNorm(nn.Module):
    """x / rms(x) · g, written out (torch's fused kernels differ between releases in what they save)."""

    def __init__(self, hidden: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def _norm(shape: BlockShape) -> nn.Module:
    return nn.LayerNorm(shape.hidden) if shape.norm == "layernorm" else RMSNorm(shape.hidden)


class TransformerLayer(nn.Module):
    """One pre-norm decoder layer: x + Attn(Norm(x)), then + MLP(Norm(·))."""

    def __init__(self, shape: BlockShape) -> None:
        super().__init__()
        self.shape = shape
        h, a, g, d, f = shape.hidden, shape.heads, shape.kv_heads, shape.head_dim, shape.ffn
        self.norm1 = _norm(shape)
        self.qkv = nn.Linear(h, (a + 2 * g) * d, bias=shape.qkv_bias)
        self.proj = nn.Linear(a * d, h, bias=shape.linear_bias)
        self.norm2 = _norm(shape)
        up = 2 * f if shape.mlp == "swiglu" else f
        self.fc1 = nn.Linear(h, up, bias=shape.linear_bias)
        self.fc2 = nn.Linear(f, h, bias=shape.linear_bias)
        for lin in (self.qkv, self.proj, self.fc1, self.fc2):
            nn.init.normal_(lin.weight, std=1.0 / math.sqrt(lin.in_features))

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        a, g, d = self.shape.heads, self.shape.kv_heads, self.shape.head_dim
        q, k, v = self.qkv(x).split([a * d, g * d, g * d], dim=-1)
        q = q.view(b, s, a, d).transpose(1, 2)
        k = k.view(b, s, g, d).transpose(1, 2)
        v = v.view(b, s, g, d).transpose(1, 2)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=g != a)
        projected: torch.Tensor = self.proj(out.transpose(1, 2).reshape(b, s, a * d))
        return projected

    def mlp(self, x: torch.Tensor) -> torch.Tensor:
        u = self.fc1(x)
        if self.shape.mlp == "swiglu":
            gate, up = u.chunk(2, dim=-1)
            u = F.silu(gate) * up
        elif self.shape.mlp == "squared-relu":
            u = F.relu(u).square()
        else:
            u = F.gelu(u)
        out: torch.Tensor = self.fc2(u)
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.norm1(x))
        out: torch.Tensor = x + self.mlp(self.norm2(x))
        return out


def build_stages(config: BenchConfig) -> list[nn.Sequential]:
    """Every virtual stage of the stack, in order (the same weights on every rank for the same seed)."""
    torch.manual_seed(config.seed)
    stages: list[nn.Sequential] = []
    for _ in range(config.num_stages):
        if config.mode == "sleep":
            blocks: list[nn.Module] = [
                SleepBlock(config.hidden, config.f_ms / 1e3, config.i_ms / 1e3, config.w_ms / 1e3)
            ]
        else:
            shape = block_shape(config.model_spec)
            blocks = [TransformerLayer(shape) for _ in range(config.layers_per_stage)]
        stages.append(nn.Sequential(*blocks).to(TORCH_DTYPES[config.dtype]))
    return stages


def make_batch(config: BenchConfig, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The step's input and target, (m·b) × s × h each, from the random seed."""
    gen = torch.Generator().manual_seed(config.seed + 1)
    shape = (config.batch, config.seq_len, config.hidden)
    x = torch.randn(shape, generator=gen)
    y = torch.randn(shape, generator=gen)
    dtype = TORCH_DTYPES[config.dtype]
    return x.to(device=device, dtype=dtype), y.to(device=device, dtype=dtype)


def set_sleeping(stages: list[nn.Sequential], on: bool) -> None:
    for stage in stages:
        for block in stage:
            if isinstance(block, SleepBlock):
                block.sleeping = on
