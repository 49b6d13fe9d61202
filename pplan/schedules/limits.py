"""The caps on how big a pipeline pplan builds and simulates a schedule for: the one home of the limits that
`pplan schedule`, `pplan bubble` (`pplan.cli.schedule`) and `pplan explain` (`pplan.explain`) refuse past.

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
