"""pplan: plan how to cut a transformer across GPUs (tensor, pipeline, data parallel) before the job starts."""

__version__ = "0.1.0"
