"""What the device checks share (torch; benchmarks/bench_components.py, bench_gemm_sweep.py,
bench_gemm_kinds.py, bench_attention.py): timing a callable as the median of repeated runs after warm-up, with
CUDA events on a GPU and the wall clock elsewhere (`Timer`), and writing a run's figures as JSON stamped with the
date, the device and the torch release (`write_record`); the options every check takes (`add_device_options`)."""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch


def add_device_options(parser: argparse.ArgumentParser, reps: int = 20) -> None:
    """--device, --reps, --warmup, --inner, --json and --bf16-tflops, as every device check takes them."""
    parser.add_argument("--device", default="cuda", help="cuda or cpu")
    parser.add_argument(
        "--bf16-tflops",
        type=float,
        default=989.4,
        help="the dense BF16 peak fractions are of (H100/H200 SXM)",
    )
    parser.add_argument("--reps", type=int, default=reps, help="timed runs of each item (the median is kept)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed runs before them")
    parser.add_argument(
        "--inner",
        type=int,
        default=1,
        help="calls back to back inside each timed run (the time is divided by it): more than 1 hides the CPU's "
        "launch latency, which a lone kernel timed between two CUDA events includes",
    )
    parser.add_argument("--json", help="write the figures to this file")


class Timer:
    """Median seconds of a callable on `device`: CUDA events on a GPU, the wall clock elsewhere; each timed run
    makes `inner` calls back to back and counts their mean."""

    def __init__(self, device: torch.device, reps: int, warmup: int, inner: int = 1) -> None:
        self.device, self.reps, self.warmup, self.inner = device, reps, warmup, inner

    @classmethod
    def from_options(cls, args: argparse.Namespace) -> Timer:
        """The timer `add_device_options`' parsed options ask for."""
        return cls(torch.device(args.device), args.reps, args.warmup, args.inner)

    def __call__(self, fn: Callable[[], object]) -> float:
        for _ in range(self.warmup):
            fn()
        times: list[float] = []
        for _ in range(self.reps):
            if self.device.type == "cuda":
                start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
                end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
                start.record()
                for _ in range(self.inner):
                    fn()
                end.record()
                torch.cuda.synchronize()
                times.append(float(start.elapsed_time(end)) / 1e3)
            else:
                t0 = time.perf_counter()
                for _ in range(self.inner):
                    fn()
                times.append(time.perf_counter() - t0)
        return statistics.median(times) / self.inner


def write_record(path: str, device: torch.device, figures: dict[str, Any]) -> None:
    """`figures` as JSON at `path`, after the date (UTC), the device's name and torch's version."""
    doc = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        **figures,
    }
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
