"""Time the causal attention core with each of torch's fused backends, on a device: the rate pplan's
`efficiency.attention` stands for (the Hopper profiles: FlashAttention-2's published 0.339 of the BF16 peak).

    python benchmarks/bench_attention.py --device cuda --json OUT.json

Cases: one rank's heads of the Megatron-LM README GPTs at s = 4096 (1.7B t1, 7.1B t2, 16B t4, 32B t8) and of Llama
3 8B t1 and 70B t8 at s = 8192, b = 1, head width 128. Each backend of `torch.nn.attention.SDPBackend` (FLASH:
FlashAttention-2; CUDNN: cuDNN's fused attention, what Transformer Engine runs on Hopper; EFFICIENT) times the
forward and the backward (input gradients of Q, K and V). The fraction printed is pplan's count over the time and
the peak: the forward's 4·b·s²·a·d/t FLOPs halved by the causal mask, the backward's 2.5 times that (four
gradient matmuls and the recomputed scores, pplan.cost.passtime.FLASH_BACKWARD_MATMULS). A backend that refuses a
case is recorded with its error. Needs torch.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from pplan.bench.timing import Timer, add_device_options, write_record

CASES = (
    # label, query heads, KV heads, s
    ("gpt-1.7b t1", 16, 16, 4096),
    ("gpt-7.1b t2", 16, 16, 4096),
    ("gpt-16b t4", 12, 12, 4096),
    ("gpt-32b t8", 7, 7, 4096),
    ("llama3-8b t1", 32, 8, 8192),
    ("llama3-70b t8", 8, 1, 8192),
)
BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION}  # fmt: skip
HEAD = 128


def _passes(
    dev: torch.device, heads: int, kv: int, s: int, backend: SDPBackend
) -> tuple[Callable[[], object], Callable[[], object]]:
    q = torch.randn(1, heads, s, HEAD, device=dev, dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(1, kv, s, HEAD, device=dev, dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(1, kv, s, HEAD, device=dev, dtype=torch.bfloat16, requires_grad=True)
    if kv != heads:  # every backend takes the heads repeated; GQA's own kernels are a backend choice too
        k = k.repeat_interleave(heads // kv, dim=1).detach().requires_grad_(True)
        v = v.repeat_interleave(heads // kv, dim=1).detach().requires_grad_(True)

    def forward() -> torch.Tensor:
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    out = forward()
    grad = torch.randn_like(out)

    def backward() -> object:
        return torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)

    return forward, backward


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_device_options(parser)
    args = parser.parse_args(argv)
    timer = Timer.from_options(args)
    dev = timer.device
    peak = args.bf16_tflops * 1e12
    rows: list[dict[str, Any]] = []
    print("| case | backend | forward ms | fraction | backward ms | fraction |")
    print("|---|---|---|---|---|---|")
    for label, heads, kv, s in CASES:
        f_flops = 4.0 * s * s * heads * HEAD / 2
        for name, backend in BACKENDS.items():
            row: dict[str, Any] = {"case": label, "heads": heads, "kv_heads": kv, "s": s, "backend": name}
            try:
                forward, backward = _passes(dev, heads, kv, s, backend)
                row["f_s"], row["i_s"] = timer(forward), timer(backward)
            except Exception as error:  # a backend that does not run this case: recorded
                row["error"] = f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
                print(f"| {label} | {name} | — | — | — | — |")
            else:
                print(
                    f"| {label} | {name} | {row['f_s'] * 1e3:.3f} | {f_flops / row['f_s'] / peak:.3f} "
                    f"| {row['i_s'] * 1e3:.3f} | {2.5 * f_flops / row['i_s'] / peak:.3f} |"
                )
            rows.append(row)
            if dev.type == "cuda":
                torch.cuda.empty_cache()
    if args.json:
        write_record(args.json, dev, {"bf16_tflops": args.bf16_tflops, "head_dim": HEAD, "attention": rows})


if __name__ == "__main__":
    main()
