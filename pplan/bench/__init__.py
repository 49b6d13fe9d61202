"""`pplan bench`: a real PyTorch pipeline that runs pplan's schedules and checks pplan's predictions.

Modules: `choices` (a case's options' choices), `config` (one case, checked before any process starts), `records` (what ranks hand back),
`blocks`, `worker` and `timing` (the only modules that import torch: the layers; one rank of a launch with its
instrumentation; the device checks' timer and record writer), `components` (the kernel groups and whole layers
a device check times, with pplan's predictions), `analysis` (measured against predicted), `document` (how a
measured case fills the `pplan.bench/1` document) and
`calibrate` (a hardware profile fitted to measured pass times). `import pplan` and `import pplan.bench` never
import torch; the CLI imports the worker only when it runs a benchmark.
"""
