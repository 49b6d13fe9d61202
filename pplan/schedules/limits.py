"""The caps on how big a pipeline pplan builds and simulates a schedule for: the one home of the limits that
`pplan schedule`, `pplan bubble` (`pplan.cli.schedule`), `pplan explain` (`pplan.explain`, `pplan.cli.explain`),
`pplan bench` and the auto scheduler (`pplan.schedules.auto`) refuse past. Each cap bounds one thing and is named
for it: ranks (`MAX_PIPELINE_RANKS`), one plan's model chunks (`MAX_PIPELINE_CHUNKS`), one schedule simulated,
drawn and exported (`MAX_STAGE_MICROBATCHES`), the lists the auto scheduler builds (`MAX_AUTO_STAGE_MICROBATCHES`)
and everything `pplan bubble` simulates (`MAX_BUBBLE_WORK`).

Plain constants, no imports: the command line reads them for its `--help` text without loading the core.
"""

from __future__ import annotations

MAX_PIPELINE_RANKS = 256
"""Most pipeline ranks p a schedule is built and simulated for (`pplan schedule`, `pplan bubble`, `pplan
explain`). Far above any pipeline trained in practice (tens of ranks); building and simulating some schedules
grows faster than p² (ZBV at p = 1,024 takes about 9 s; `explain` simulates once per sensitivity input: at
p = 256 its slowest family takes about 20 s, at p = 1,000 40 s and 0.7 GB, at p = 2,000 over 300 s), so the cap
keeps every run within seconds."""
MAX_PIPELINE_CHUNKS = 512
"""Most model chunks p·v one plan is explained for (two per rank at `MAX_PIPELINE_RANKS`): the schedule's
stages; 256 ranks of 8 chunks took 25 s."""
MAX_STAGE_MICROBATCHES = 50_000
"""Most stage-micro-batches p·v·m of one schedule that `pplan schedule` simulates, draws and exports, and that
`pplan explain` draws or exports (each is two or three actions: F and B, or F, I and W). At the cap, --json, --svg
and --csv together take about 5 s and 400 MB; the explicit action list and the SVG (one rectangle per action) grow
linearly with it."""
MAX_AUTO_STAGE_MICROBATCHES = 16_384
"""Most stage-micro-batches p·m the auto scheduler builds lists for (`pplan.schedules.auto`): it simulates each
candidate it tries, so its time grows with p·m (about 0.2 s at p = 32, m = 256,
benchmarks/bench_auto_schedule.py)."""
MAX_BUBBLE_WORK = 300_000
"""Most stage-micro-batches `pplan bubble` simulates over all its points: the sum over its schedules (v = 1, 2, 4,
1, 1) and its m values of p·v·m. The default m values (p, 2p, ... 16p) fit up to p = 32 (about 3 s)."""
