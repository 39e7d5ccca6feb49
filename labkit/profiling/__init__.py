"""Profiling a loader (chapter 13): per-batch timelines, torch.profiler, sampling, diagnose."""
