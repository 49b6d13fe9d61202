"""pplan's predictions against the world: published step times (`published`, `pplan validate`), published
per-GPU memory (`memory`, `pplan validate --memory`), whether `recommend` would have found the configurations
published runs used (`practice`), the 2024–26 runs at their published cuts (`recent`), and how the results fill
the `pplan.validate/3` document (`document`)."""
