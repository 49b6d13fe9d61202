"""Inputs: validated hardware and model profiles (`specs`), finding and reading them (`catalog`), and Hugging Face
`config.json` import (`hf_config`). The bundled TOML files ship inside this package in a wheel."""
