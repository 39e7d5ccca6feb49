"""Named benchmarks that print their figures (chapters 01-02, 06, 09-15; ``labkit bench``).

Performance is checked here, not in timed test assertions that flake: a benchmark reports
what it measured, the interval around it and a verdict (pass, fail or inconclusive), and
the numbers go into the closing notes. Each benchmark is a module of
:mod:`labkit_tools.benchmarks`; importing this module registers them all.
Run one with ``labkit bench NAME [--json]``.
"""

from __future__ import annotations

from .benchmarks import (  # noqa: F401 - importing each registers it
    decode,
    formats,
    gpu,
    media,
    mmap,
    objectstore,
    overhead,
    prefetch,
    profiling,
    tokens,
    webdataset,
)
from .benchmarks.registry import (
    BENCHMARKS,
    benchmark,
    format_result,
    record_result,
    run_benchmark,
)

__all__ = ["BENCHMARKS", "benchmark", "format_result", "record_result", "run_benchmark"]
