"""Tools around the chapters (ch. 00): ``labkit run``, reports, benchmarks, the CLI.

The top layer: tools may import the spine and the chapter folders, never the other way
round (tests/test_layout.py). Its public names are
reached as ``lk.tools.NAME``.
"""

from __future__ import annotations

from .. import ceilings  # noqa: F401 (lk.ceilings, for chapters 00 and 16)
from .bench import run_benchmark
from .checkup import Check, doctor, format_doctor
from .render import write_report
from .report import comparison_rows, format_table
from .runner import run_notebooks

__all__ = [
    "Check",
    "comparison_rows",
    "doctor",
    "format_doctor",
    "format_table",
    "run_benchmark",
    "run_notebooks",
    "write_report",
]
