"""Tools around the chapters (ch. 00): ``labkit run``, reports, benchmarks, the CLI.

The top layer: tools may import the spine and the chapter folders, never the other way
round (tests/test_layout.py). Its public names are
reached as ``lk.tools.NAME``.
"""

from __future__ import annotations

from .bench import run_benchmark
from .checkup import doctor, format_doctor

__all__ = [
    "doctor",
    "format_doctor",
    "run_benchmark",
]
