"""Profiling a loader (chapter 13): the per-batch timeline, and whether py-spy may sample here.
"""

from __future__ import annotations

from . import pyspy  # noqa: F401  registers lk.status("pyspy")
from .timeline import record_timeline

__all__ = ["record_timeline"]
