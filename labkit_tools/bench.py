"""Named benchmarks that print their figures (chapters 01-02, 06, 09-15; ``labkit bench``).

Performance is reported here, not asserted in tests that flake: each figure with its
interval and a verdict. Importing this module registers every benchmark module.
"""

from __future__ import annotations

import importlib
import pkgutil

from . import benchmarks
from .benchmarks.registry import BENCHMARKS, benchmark, format_result, record_result, run_benchmark

for _module in pkgutil.iter_modules(benchmarks.__path__):  # importing each registers it
    importlib.import_module(f"{benchmarks.__name__}.{_module.name}")

__all__ = ["BENCHMARKS", "benchmark", "format_result", "record_result", "run_benchmark"]
