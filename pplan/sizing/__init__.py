"""The capacity question that comes before the cut (`pplan size`): for a model and a token budget, how many GPUs of
which kind, how long, at what cost and energy, with interruptions counted.

- `goodput`: interruptions, checkpoints and restarts (Young's interval), the wall time they add;
- `costs`: GPU-hours, price and energy of a run;
- `sweep`: the GPU counts tried, the batch policy, and the exact best plan (`recommend`'s search) at each point;
- `answers`: what a user asks of the sweep (the least GPUs that fit, the fewest that meet a deadline, the cheapest,
  the Pareto front of time against cost, the knee of the scaling curve);
- `document`: how the sweep and its answers fill the `pplan.size/1` document.

Pure: no files, no terminal, no processes (pplan.cli.size runs the points in parallel).
"""
