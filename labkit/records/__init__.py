"""Records: the checkpoint, the machine, reports, labkit run (ch. 00, 11).

Its public names are reached as ``lk.records.NAME`` (``import labkit as lk``); its
modules' other names are for labkit and tests: ``table.text_table`` renders every
fixed-width table labkit prints.
"""

from __future__ import annotations

from .checkpoint import load_records, read_checkpoint, reference_figures
from .machine import environment, format_environment, versions

__all__ = [
    "environment",
    "format_environment",
    "load_records",
    "read_checkpoint",
    "reference_figures",
    "versions",
]
