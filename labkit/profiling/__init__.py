"""Profiling a loader (chapter 13): per-batch timelines, torch.profiler, sampling, diagnose.
"""

from __future__ import annotations

from .checklist import diagnose
from .diagnosis import DiagnoseError, Diagnosis
from .lanes import plot_timelines
from .sampling import sample_workers
from .timeline import record_timeline
from .torchprof import profile_loop, profiler_overhead, read_trace

__all__ = [
    "DiagnoseError",
    "Diagnosis",
    "diagnose",
    "plot_timelines",
    "profile_loop",
    "profiler_overhead",
    "read_trace",
    "record_timeline",
    "sample_workers",
]
