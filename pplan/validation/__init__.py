"""pplan's predictions against the world: published step times (`published`, `pplan validate`), published
per-GPU memory (`memory`, `pplan validate --memory`) and whether `recommend` would have found the configurations
published runs used (`practice`)."""
