"""vramlint: lint training and serving configs for GPU memory before the job runs out of it."""

__version__ = "0.1.0"
