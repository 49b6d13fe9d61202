"""Time a tensor-parallel GEMM split into t chunks of rows, as a TP-overlap stack runs it (Transformer Engine's
userbuffers split each sequence-parallel GEMM into t pieces so that each piece's all-gather or reduce-scatter hides
under another's compute), against the whole GEMM, on one device: what the split costs beyond the FLOPs. pplan
assumes (pplan/cost/tensor_parallel.py `TpOverlap`) that each extra chunk pays one kernel overhead (4 µs), not a GEMM's
fixed 18 µs, because the chunks overlap each other's ramp and tail on alternating streams.

    python benchmarks/bench_tp_chunks.py --device cuda --json OUT.json

Cases: the four GEMMs of the Megatron-LM README's 32B at t = 8 and of Llama 3 70B at t = 8 (the sequence-parallel
rows gathered: M = b·s = 4,096 and 8,192), split into 8 chunks along M; each timed whole, as 8 chunks on one stream,
and as 8 chunks alternating between two streams. Needs torch; on a CPU the streams are not used.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import torch

from pplan.bench.timing import Timer, add_device_options, write_record

CASES = (
    # label, M, K, N
    ("gpt-32b t8 qkv", 4096, 7168, 2688),
    ("gpt-32b t8 proj", 4096, 896, 7168),
    ("gpt-32b t8 fc1", 4096, 7168, 3584),
    ("gpt-32b t8 fc2", 4096, 3584, 7168),
    ("llama3-70b t8 qkv", 8192, 8192, 1280),
    ("llama3-70b t8 proj", 8192, 1024, 8192),
    ("llama3-70b t8 fc1", 8192, 8192, 7168),
    ("llama3-70b t8 fc2", 8192, 3584, 8192),
)
CHUNKS = 8


def whole(a: torch.Tensor, b: torch.Tensor) -> Callable[[], object]:
    return lambda: a @ b


def one_stream(a: torch.Tensor, b: torch.Tensor) -> Callable[[], object]:
    pieces = a.chunk(CHUNKS)
    return lambda: [p @ b for p in pieces]


def two_streams(a: torch.Tensor, b: torch.Tensor) -> Callable[[], object]:
    pieces = a.chunk(CHUNKS)
    if a.device.type != "cuda":
        return lambda: [p @ b for p in pieces]
    streams = (torch.cuda.Stream(a.device), torch.cuda.Stream(a.device))  # type: ignore[no-untyped-call]

    def run() -> None:
        main = torch.cuda.current_stream(a.device)
        for s in streams:
            s.wait_stream(main)
        for i, p in enumerate(pieces):
            with torch.cuda.stream(streams[i % 2]):
                p @ b
        for s in streams:
            main.wait_stream(s)

    return run


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_device_options(parser)
    args = parser.parse_args(argv)
    timer = Timer.from_options(args)
    dev = timer.device
    rows: list[dict[str, Any]] = []
    print(
        "| case | M × K × N | whole ms | 8 chunks, one stream | 8 chunks, two streams | extra µs per chunk (two) |"
    )
    print("|---|---|---|---|---|---|")
    for label, m, k, n in CASES:
        a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        b = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
        whole_s, one_s, two_s = timer(whole(a, b)), timer(one_stream(a, b)), timer(two_streams(a, b))
        rows.append({"case": label, "m": m, "k": k, "n": n, "chunks": CHUNKS, "whole_s": whole_s,
                     "one_stream_s": one_s, "two_streams_s": two_s})  # fmt: skip
        extra_us = (two_s - whole_s) / (CHUNKS - 1) * 1e6
        print(
            f"| {label} | {m} × {k} × {n} | {whole_s * 1e3:.4f} | {one_s * 1e3:.4f} | {two_s * 1e3:.4f} "
            f"| {extra_us:.1f} |"
        )
    if args.json:
        write_record(args.json, dev, {"bf16_tflops": args.bf16_tflops, "tp_chunks": rows})


if __name__ == "__main__":
    main()
