"""Export a `Schedule` as the compute-only CSV torch.distributed.pipelining runs.

`to_torch_csv(schedule)` returns the text of the file that
`torch.distributed.pipelining.schedules._PipelineScheduleRuntime._load_csv(path, format="compute_only")` reads
(torch 2.13): one row per rank, its actions in order in torch's notation (`0F0`, `1I3`, `1W3`, `0B5`); torch
infers the stage → rank placement from the rows and inserts the sends and receives itself. An overlapped F&B
pair is written as `(2F4;5B1)OVERLAP_F_B`, torch's notation for the same unit. Pure: returns text, writes nothing.
"""

from __future__ import annotations

from pplan.errors import ConfigError
from pplan.schedules.actions import Schedule


def torch_rows(schedule: Schedule) -> list[list[str]]:
    """Each rank's cells, as the CSV writes them."""
    rows: list[list[str]] = []
    for rank, actions in enumerate(schedule.actions):
        pairs = set(schedule.overlaps[rank]) if schedule.overlaps else set()
        cells: list[str] = []
        k = 0
        while k < len(actions):
            if k in pairs:
                cells.append(f"({actions[k]};{actions[k + 1]})OVERLAP_F_B")
                k += 2
            else:
                cells.append(str(actions[k]))
                k += 1
        rows.append(cells)
    return rows


def to_torch_csv(schedule: Schedule) -> str:
    """The compute-only CSV for torch's `_PipelineScheduleRuntime._load_csv` (one line per rank).

    torch runs one pipeline of consecutive stages, stage s feeding s + 1; a schedule with several chains (the
    bidirectional DualPipe) cannot be expressed and raises ConfigError.
    """
    if len(schedule.chains) != 1 or schedule.chains[0] != tuple(range(schedule.num_stages)):
        raise ConfigError(
            "--schedule",
            f"{schedule.name} runs {len(schedule.chains)} pipelines; torch's runtime runs one chain "
            "of stages 0..S−1",
            "export dualpipev (the V form of DualPipe) instead",
        )
    return "".join(",".join(cells) + "\n" for cells in torch_rows(schedule))
