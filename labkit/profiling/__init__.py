"""Profiling a loader (chapter 13): the per-batch timeline."""

from __future__ import annotations

from .timeline import record_timeline

__all__ = ["record_timeline"]
