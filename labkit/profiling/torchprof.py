"""torch.profiler on a training loop: labelled stages, a schedule, the trace read back (chapter 13).

:func:`profile_loop` runs a loop under ``torch.profiler.profile`` with a schedule (skip
``wait`` steps, record ``warmup`` steps and throw them away, keep ``active`` steps), each
stage in a ``record_function`` label, and exports the Chrome trace JSON that Perfetto
(ui.perfetto.dev) and chrome://tracing open (TensorBoard's profiler plugin, which also read
it, is deprecated upstream). :func:`read_trace` reads it back
and sorts its spans: the DataLoader's own ``enumerate(DataLoader)#...__next__`` span is the
loop waiting for data; the step's label is compute. On a GPU the trace also holds kernels;
their summed time over the active window is how busy the GPU was.
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..instruments.measurement import wait_fraction

#: The prefix torch gives the span of every ``next()`` on a DataLoader iterator.
DATA_SPAN = "enumerate(DataLoader)"


@dataclass
class TraceSummary:
    """What a Chrome trace says about a loop: data-wait vs labelled stages, in ms."""

    path: Path
    steps: int
    data_wait_ms: float          # sum of the DataLoader __next__ spans
    stage_ms: dict[str, float]   # sum per record_function label (other than the data span)
    window_ms: float             # from the first to the last recorded step's end
    top_ops: list[tuple[str, float]] = field(default_factory=list)  # (op, self ms)
    kernel_ms: float | None = None   # GPU kernels' total (None: no GPU in the trace)

    @property
    def data_wait_fraction(self) -> float:
        return wait_fraction(self.data_wait_ms, self.window_ms)

    @property
    def gpu_busy_fraction(self) -> float | None:
        return None if self.kernel_ms is None else self.kernel_ms / self.window_ms

    def __str__(self) -> str:
        stages = ", ".join(f"{k} {v:,.1f} ms" for k, v in self.stage_ms.items())
        s = (f"{self.steps} steps over {self.window_ms:,.1f} ms: data wait "
             f"{self.data_wait_ms:,.1f} ms ({self.data_wait_fraction:.0%}); {stages}")
        if self.kernel_ms is not None:
            s += f"; GPU kernels {self.kernel_ms:,.1f} ms ({self.gpu_busy_fraction:.0%} busy)"
        return s


def read_trace(path, labels=("step",)) -> TraceSummary:
    """Sort a Chrome trace's complete spans ("ph": "X") into data wait, stages and ops."""
    path = Path(path)
    events = json.loads(path.read_text())["traceEvents"]
    spans = [e for e in events if e.get("ph") == "X" and "dur" in e]
    steps = [e for e in spans if e["name"].startswith("ProfilerStep#")]
    data = [e for e in spans if e["name"].startswith(DATA_SPAN)]
    stage_ms = {lab: sum(e["dur"] for e in spans if e["name"] == lab) / 1e3 for lab in labels}
    if steps:
        window = (max(e["ts"] + e["dur"] for e in steps) - min(e["ts"] for e in steps)) / 1e3
    else:
        window = (max(e["ts"] + e["dur"] for e in spans) - min(e["ts"] for e in spans)) / 1e3
    ops: dict[str, float] = {}
    for e in spans:
        if e.get("cat") == "cpu_op":
            ops[e["name"]] = ops.get(e["name"], 0.0) + e["dur"] / 1e3
    kernels = [e for e in spans if e.get("cat") == "kernel"]
    return TraceSummary(
        path=path, steps=len(steps), data_wait_ms=sum(e["dur"] for e in data) / 1e3,
        stage_ms=stage_ms, window_ms=window,
        top_ops=sorted(ops.items(), key=lambda kv: -kv[1])[:8],
        kernel_ms=sum(e["dur"] for e in kernels) / 1e3 if kernels else None)


def profile_loop(loader, step, *, wait: int = 1, warmup: int = 1, active: int = 5,
                 trace_dir=None, labels: dict | None = None) -> TraceSummary:
    """Run ``wait + warmup + active`` steps of a loop under torch.profiler; read the trace.

    ``step(batch)`` is the training step, labelled ``"step"``; ``labels`` maps more labels to
    callables run on the batch in turn before it (e.g. ``{"to_device": fn}``). The trace is
    written to ``trace_dir`` (default: a new temporary folder, never the repository).
    """
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function, schedule


    labels = dict(labels or {})
    acts = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        acts.append(ProfilerActivity.CUDA)
    out = Path(trace_dir or tempfile.mkdtemp(prefix="labkit-trace-"))
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"trace-{time.strftime('%Y%m%d-%H%M%S')}.json"

    def export(prof):
        prof.export_chrome_trace(str(path))

    it = iter(loader)
    try:
        with profile(activities=acts, schedule=schedule(wait=wait, warmup=warmup, active=active,
                                                        repeat=1),
                     on_trace_ready=export) as prof:
            for _ in range(wait + warmup + active):
                batch = next(it)  # torch's own span: enumerate(DataLoader)#...__next__
                for name, fn in labels.items():
                    with record_function(name):
                        batch = fn(batch)
                with record_function("step"):
                    step(batch)
                prof.step()
    finally:
        del it  # the last reference: torch stops the workers (persistent ones stay the loader's)
    return read_trace(path, labels=(*labels, "step"))


def profiler_overhead(loader, step, batches: int, repeats: int = 2) -> dict:
    """Seconds for ``batches`` steps of the loop plain and under an always-active profiler.

    Plain and profiled runs alternate ``repeats`` times; the fastest of each is kept (on a
    shared machine noise only slows a run down).
    """
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function


    def loop(profiled: bool) -> float:
        it = iter(loader)
        try:
            next(it)  # start-up is not the profiler's cost
            t = time.perf_counter()
            if profiled:
                acts = [ProfilerActivity.CPU] + (
                    [ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
                with profile(activities=acts):
                    for _ in range(batches):
                        with record_function("step"):
                            step(next(it))
            else:
                for _ in range(batches):
                    step(next(it))
            return time.perf_counter() - t
        finally:
            del it  # torch stops the workers when the last reference goes

    runs = [(loop(False), loop(True)) for _ in range(repeats)]
    plain, profiled = min(r[0] for r in runs), min(r[1] for r in runs)
    return {"plain_s": plain, "profiled_s": profiled, "overhead": profiled / plain - 1}
