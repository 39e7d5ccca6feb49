"""What a person looks at: the dashboard, plots, figures (every chapter); public as ``lk.*``."""

__all__: list[str] = []
