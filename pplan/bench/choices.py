"""The choices of one benchmark case (`pplan bench --mode/--runtime/--dtype`); imports only `typing`, so the
command line can offer them without loading the case's validation (`pplan.bench.config`)."""

from __future__ import annotations

from typing import Literal

Mode = Literal["sleep", "compute"]
"""sleep: blocks that sleep fixed F/I/W times; compute: real transformer layers."""
Runtime = Literal["auto", "torch", "csv"]
"""torch: torch's schedule class; csv: pplan's lists through torch's runtime; auto: torch's where it has one."""
DType = Literal["float32", "bfloat16"]
"""Parameter and activation dtype of the blocks."""
