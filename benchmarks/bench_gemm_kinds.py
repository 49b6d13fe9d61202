"""Time the GEMM kinds pplan prices apart from plain BF16 GEMMs, on a device: the routed experts' grouped GEMMs
(`efficiency.grouped_gemm`) and FP8 GEMMs (`efficiency.fp8_matmul`), each beside the plain BF16 GEMM of the same
FLOPs, so the measured ratios can be set beside the profile's.

    python benchmarks/bench_gemm_kinds.py --device cuda --json OUT.json

Grouped cases: one expert-parallel rank's experts in one micro-batch of b·s = 4,096 tokens (16,384 for GPT-OSS's
published b = 4) with balanced routing, so each of the E/ep local experts gets q·k·ep/E rows; the experts' first
GEMM (gate and up, N = 2 × the expert FFN width) and second (K = the expert FFN width), each timed as
`torch._grouped_mm` over the local experts, as one BF16 GEMM of all their rows (the same FLOPs) and as a loop of
per-expert GEMMs. FP8 cases: `torch._scaled_mm` on E4M3 inputs with per-tensor scales and a BF16 output (the
GEMM alone: no casts, no amax) at Llama 3 70B's t8 shard shapes and one large square GEMM, beside BF16. Fractions
are of the dense peaks given (989.4 TFLOP/s BF16, 1,978.9 FP8: H100 and H200 SXM). Needs torch (2.8 or later for
`_grouped_mm`); a kind the device or release does not run is recorded with its error.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import torch

from pplan.bench.timing import Timer, add_device_options, write_record

GROUPED = (
    # label, local experts G, rows per expert R, hidden h, expert FFN width f
    ("gpt-oss-120b ep8 b4", 16, 16384 * 4 * 8 // 128, 2880, 2880),
    ("deepseek-v3 ep64", 4, 4096 * 8 * 64 // 256, 7168, 2048),
    ("qwen3-30b-a3b ep8", 16, 4096 * 8 * 8 // 128, 2048, 768),
    ("mixtral-8x7b ep8", 1, 4096 * 2 * 8 // 8, 4096, 14336),
)
FP8 = (
    # label, M, K, N
    ("llama3-70b t8 qkv", 8192, 8192, 1280),
    ("llama3-70b t8 fc1", 8192, 8192, 7168),
    ("llama3-70b t8 fc2", 8192, 3584, 8192),
    ("square 8192", 8192, 8192, 8192),
)


def _attempt(timer: Timer, make: Callable[..., Callable[[], object]], *args: Any) -> float | str:
    try:
        return timer(make(*args))
    except Exception as error:  # a kind this device or torch release does not run: recorded, not fatal
        return f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"


def grouped_op(dev: torch.device, groups: int, rows: int, k: int, n: int) -> Callable[[], object]:
    a = torch.randn(groups * rows, k, device=dev, dtype=torch.bfloat16)
    b = torch.randn(groups, n, k, device=dev, dtype=torch.bfloat16).transpose(-2, -1)  # K-major per expert
    offs = torch.arange(rows, groups * rows + 1, rows, device=dev, dtype=torch.int32)
    return lambda: torch._grouped_mm(a, b, offs=offs)


def looped_op(dev: torch.device, groups: int, rows: int, k: int, n: int) -> Callable[[], object]:
    a = [torch.randn(rows, k, device=dev, dtype=torch.bfloat16) for _ in range(groups)]
    b = [torch.randn(k, n, device=dev, dtype=torch.bfloat16) for _ in range(groups)]
    return lambda: [x @ w for x, w in zip(a, b, strict=True)]


def dense_op(dev: torch.device, m: int, k: int, n: int) -> Callable[[], object]:
    a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    b = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
    return lambda: a @ b


def fp8_op(dev: torch.device, m: int, k: int, n: int) -> Callable[[], object]:
    a = torch.randn(m, k, device=dev).to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device=dev).to(torch.float8_e4m3fn).t()  # column-major, as _scaled_mm wants
    one = torch.ones((), device=dev)
    return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fp8-tflops", type=float, default=1978.9)
    add_device_options(parser)
    args = parser.parse_args(argv)
    timer = Timer.from_options(args)
    dev = timer.device
    bf16_peak, fp8_peak = args.bf16_tflops * 1e12, args.fp8_tflops * 1e12

    def frac(flops: float, seconds: float | str, peak: float) -> str:
        return f"{flops / seconds / peak:.3f}" if isinstance(seconds, float) else "—"

    grouped: list[dict[str, Any]] = []
    print(
        "| case | GEMM | G × R × K × N | grouped | one BF16 GEMM | per-expert loop | (fractions of the BF16 peak) |"
    )
    print("|---|---|---|---|---|---|---|")
    for label, g, r, h, f in GROUPED:
        for name, k, n in (("fc1", h, 2 * f), ("fc2", f, h)):
            flops = 2.0 * g * r * k * n
            row: dict[str, Any] = {"case": label, "gemm": name, "groups": g, "rows": r, "k": k, "n": n}
            row["grouped_s"] = _attempt(timer, grouped_op, dev, g, r, k, n)
            row["dense_s"] = _attempt(timer, dense_op, dev, g * r, k, n)
            row["looped_s"] = _attempt(timer, looped_op, dev, g, r, k, n)
            grouped.append(row)
            print(
                f"| {label} | {name} | {g} × {r} × {k} × {n} | {frac(flops, row['grouped_s'], bf16_peak)} "
                f"| {frac(flops, row['dense_s'], bf16_peak)} | {frac(flops, row['looped_s'], bf16_peak)} | |"
            )
            if dev.type == "cuda":
                torch.cuda.empty_cache()
    fp8: list[dict[str, Any]] = []
    print()
    print("| case | M × K × N | FP8, of the FP8 peak | BF16, of the BF16 peak | FP8 speed-up |")
    print("|---|---|---|---|---|")
    for label, m, k, n in FP8:
        flops = 2.0 * m * k * n
        row = {"case": label, "m": m, "k": k, "n": n}
        row["fp8_s"] = _attempt(timer, fp8_op, dev, m, k, n)
        row["bf16_s"] = _attempt(timer, dense_op, dev, m, k, n)
        fp8.append(row)
        both = isinstance(row["fp8_s"], float) and isinstance(row["bf16_s"], float)
        speedup = f"{row['bf16_s'] / row['fp8_s']:.2f}" if both else "—"
        print(
            f"| {label} | {m} × {k} × {n} | {frac(flops, row['fp8_s'], fp8_peak)} "
            f"| {frac(flops, row['bf16_s'], bf16_peak)} | {speedup} |"
        )
    if args.json:
        write_record(
            args.json,
            dev,
            {"bf16_tflops": args.bf16_tflops, "fp8_tflops": args.fp8_tflops, "grouped": grouped, "fp8": fp8},
        )


if __name__ == "__main__":
    main()
