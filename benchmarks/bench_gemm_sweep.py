"""Time BF16 GEMMs over a sweep of token counts M for the weight shapes (K × N) of real tensor-parallel shards, on
a device: how a GEMM's time grows with its FLOPs, and the fixed time per GEMM (the intercept of time against FLOPs
at a fixed weight shape), which pplan's pass-time model charges per GEMM kernel.

    python benchmarks/bench_gemm_sweep.py --device cuda --json OUT.json
    python benchmarks/bench_gemm_sweep.py --device cpu --tokens 64 128 --shapes 64x64   # a smoke run

Each (M, K, N) is an M×K by K×N product, timed with CUDA events (the wall clock on a CPU) as the median of `--reps`
runs after warm-up. For each weight shape the script fits t = FLOPs / rate + fixed by least squares on relative
error and prints the rate (as a fraction of `--bf16-tflops`) and the fixed µs. Needs torch.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch

from pplan.bench.timing import Timer, add_device_options, write_record

SHAPES = (
    "2048x2048",  # GPT 1.7B projection
    "2048x8192",  # GPT 1.7B fc1
    "4096x4096",  # Llama 3 8B projection
    "7168x896",  # GPT 32B projection at t8 (input gradient's N)
    "7168x2688",  # GPT 32B QKV at t8
    "8192x1280",  # Llama 3 70B QKV at t8
    "8192x7168",  # Llama 3 70B fc1 at t8
    "12288x6144",  # GPT 177B fc1 at t8
)
TOKENS = (1024, 2048, 4096, 8192, 16384, 32768)


def product(a: torch.Tensor, b: torch.Tensor) -> Callable[[], object]:
    return lambda: a @ b


def fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """(seconds per FLOP, fixed seconds) minimising Σ ((a·x + c) / t − 1)² over (FLOPs x, seconds t)."""
    sxx = sum((x / t) ** 2 for x, t in points)
    sx = sum(x / t**2 for x, t in points)
    s1 = sum(1 / t**2 for _, t in points)
    bx = sum(x / t for x, t in points)
    b1 = sum(1 / t for _, t in points)
    det = sxx * s1 - sx * sx
    return (bx * s1 - b1 * sx) / det, (sxx * b1 - sx * bx) / det


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), help="K×N weight shapes, e.g. 4096x4096")
    parser.add_argument("--tokens", nargs="+", type=int, default=list(TOKENS), help="the M values")
    add_device_options(parser)
    args = parser.parse_args(argv)
    timer = Timer.from_options(args)
    dev = timer.device
    rows = []
    fits = []
    print("| K × N | M | ms | fraction of peak |")
    print("|---|---|---|---|")
    for shape in args.shapes:
        k, n = map(int, shape.split("x"))
        b = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
        points = []
        for m in args.tokens:
            a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
            seconds = timer(product(a, b))
            flops = 2.0 * m * k * n
            points.append((flops, seconds))
            rows.append({"m": m, "k": k, "n": n, "seconds": seconds})
            print(
                f"| {k} × {n} | {m} | {seconds * 1e3:.4f} | {flops / seconds / (args.bf16_tflops * 1e12):.3f} |"
            )
        per_flop, fixed = fit(points)
        fits.append(
            {"k": k, "n": n, "rate_fraction": 1 / per_flop / (args.bf16_tflops * 1e12), "fixed_s": fixed}
        )
    print()
    print("| K × N | fitted fraction of peak | fixed µs |")
    print("|---|---|---|")
    for f in fits:
        print(f"| {f['k']} × {f['n']} | {f['rate_fraction']:.3f} | {f['fixed_s'] * 1e6:.1f} |")
    if args.json:
        write_record(args.json, dev, {"bf16_tflops": args.bf16_tflops, "gemms": rows, "fits": fits})


if __name__ == "__main__":
    main()
