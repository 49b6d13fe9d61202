"""Inputs: validated model and hardware profiles (`model_spec`, `hardware_spec`, on the shared field types, ranges
and frozen base of `fields`; a hardware profile's figures checked for plausibility by `plausible`), pass durations
for `pplan schedule --durations` (`durations`), a spec's validation errors as (field, message, fix) (`problems`),
finding and reading them (`catalog`), and Hugging Face `config.json` import (`hf_config`). The bundled TOML files
ship inside this package in a wheel."""
