"""Profiling a loader: per-batch timelines, torch.profiler traces, sampling, diagnose (chapter 13)."""
