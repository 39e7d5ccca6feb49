"""``labkit diagnose MODULE:FACTORY``: what bounds your own loader, and a knob (chapter 13).

Chapter 13's checklist as one command: the loader alone and against a simulated step, the
bound, the data path's hotspot (cProfile, ``num_workers=0``), a verdict with chapter 09's
worker arithmetic, the roofline's ceiling; one wall-clock limit, its error naming the phase.
"""

from __future__ import annotations

import cProfile
import gc
import importlib
import math
import os
import pstats
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

from torch.utils.data import DataLoader

from labkit.ceilings import measure_ceilings
from labkit.display.figures import png_bytes
from labkit.errors import LabkitError
from labkit.facilities import usable_cores
from labkit.instruments.meter import measure, simulated_step
from labkit.loading.loaders import worker_processes
from labkit.loading.processes import stop_processes
from labkit_tools.timeline import record_timeline, same_batches

LOADER_BOUND_WAIT = 0.25  # a loop waiting more than this share of its time: loader-bound
STEP_BOUND_WAIT, STEP_BOUND_RATIO = 0.10, 1.5  # less, and the loader this much faster: step
IN_PROCESS_RATIO = 10     # one process this many times the step: workers cost more than they give
IO_CPU_SHARE = 0.5        # a data path less CPU than this (sleep, I/O) needs no core per worker
#: Frames of the loader's machinery, not the learner's data path (collate is not among them).
_MACHINERY = tuple(os.path.join(*p) for p in [
    ("torch", "utils", "data", ""), ("torch", "_ops.py"), ("torch", "autograd", "profiler.py"),
    ("labkit_tools", "diagnose.py"), ("labkit", "loading", ""), ("cProfile",), ("pstats",)])


class DiagnoseError(LabkitError):
    """The loader could not be built, iterated or measured in time (the message says which)."""


@dataclass
class Diagnosis:
    """What :func:`diagnose` found; ``str()`` is the report, :meth:`as_dict` its JSON."""

    target: str
    bound: str                          # "loader", "step" or "balanced"
    loader_batches_per_s: float
    step_batches_per_s: float | None
    wait_fraction: float | None
    num_workers: int | None             # the loader's, None if not a DataLoader
    one_process_batches_per_s: float | None
    cpu_share: float | None             # CPU / wall of the data path in this process
    first_batch_s: float | None = None  # iter() to the first batch: worker start-up included
    hotspots: list = field(default_factory=list)     # [{"name", "where", "share", "via"}]
    suggestion: dict = field(default_factory=dict)   # {"knobs": {...}, "why": "..."}
    timeline: str | None = None
    samples_per_batch: float | None = None
    bytes_per_sample: float | None = None    # bytes of a sample as the loop receives it
    tensors_per_batch: int | None = None     # torch tensors in a batch (images, labels: 2)
    ceiling: dict = field(default_factory=dict)  # the roofline's verdict

    def as_dict(self) -> dict:
        return {k: None if isinstance(v, float) and math.isnan(v) else v
                for k, v in self.__dict__.items()}

    def __str__(self) -> str:
        def f(x, fmt="{:,.1f}"):
            return "n/a" if x is None or x != x else fmt.format(x)  # x != x: NaN

        c, hs = self.ceiling, self.hotspots
        return "\n".join([
            f"diagnose {self.target}", f"  bound:                 {self.bound}",
            f"  loader_batches_per_s:  {f(self.loader_batches_per_s)}  (num_workers="
            f"{self.num_workers}; one process: {f(self.one_process_batches_per_s)})",
            f"  step_batches_per_s:    {f(self.step_batches_per_s)}",
            f"  wait_fraction:         {f(self.wait_fraction, '{:.1%}')}",
            f"  data path CPU share:   {f(self.cpu_share, '{:.0%}')}",
            f"  first batch:           {f(self.first_batch_s, '{:.2f} s')}",
            "  hotspots (cProfile, this process, num_workers=0):",
            *([f"    {h['share']:6.1%}  {h['name']}" + (f" (in {h['via']})" if h["via"] else "")
               + f"  {h['where']}" for h in hs] or ["    none found"]),
            f"  suggestion:            {self.suggestion.get('knobs') or 'no knob'}",
            f"    why: {self.suggestion.get('why', '')}",
            *([f"  ceiling:               {c['label']}: the loader runs at {c['fraction']:.0%} "
               f"of the {c['limit']:,.0f} samples/s it allows; its stages predict "
               f"{c['predicted']:,.0f} ({c['how']})"] if c else []),
            *([f"  timeline:              {self.timeline}"] if self.timeline else [])])


class _Limit:
    """A wall-clock limit (SIGALRM, main thread only); the error names the phase that overran."""

    def __init__(self, seconds: float | None, target: str):
        self.seconds, self.target, self.phase = seconds, target, "starting"

    def __enter__(self):
        self.armed = bool(self.seconds) and threading.current_thread() is threading.main_thread()
        if self.armed:
            self.old = signal.signal(signal.SIGALRM, self._fire)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
        return self

    def _fire(self, *_):
        raise DiagnoseError(f"{self.target}: {self.phase} did not finish within the "
                            f"{self.seconds:g} s limit (a read, a lock or a worker that never "
                            "returns?); its workers were stopped")

    def __exit__(self, *exc):
        if self.armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.old)


def _hotspots(iterable, batches: int, top: int = 5) -> tuple[list, float]:
    """cProfile over ``batches`` batches: functions by self time, a built-in's (``time.sleep``,
    a C decoder) charged to the Python function that called it; and the CPU share."""
    prof, wall, cpu = cProfile.Profile(), time.perf_counter(), time.process_time()
    with prof:
        for _ in islice(iterable, batches):
            pass
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    own, via = {}, {}
    for fn, (_cc, _nc, tt, _ct, callers) in pstats.Stats(prof).stats.items():
        if not (fn[0] == "~" or fn[0].startswith("<")):
            own[fn] = own.get(fn, 0.0) + tt
            continue
        edges = sum(v[2] for v in callers.values()) or 1.0
        for caller, edge in callers.items():
            own[caller] = own.get(caller, 0.0) + tt * edge[2] / edges
            if tt * edge[2] / edges > via.get(caller, ("", 0.0))[1]:
                via[caller] = (fn[2], tt * edge[2] / edges)
    hs = [{"name": fn[2], "where": f"{fn[0]}:{fn[1]}", "share": round(s / wall, 4),
           "via": via[fn][0] if fn in via and via[fn][1] > 0.5 * s else ""}
          for fn, s in sorted(own.items(), key=lambda kv: -kv[1]) if s >= 0.01 * wall
          and not (fn[0] == "~" or fn[0].startswith("<") or any(m in fn[0] for m in _MACHINERY))]
    # on a busy machine CPU work gets less than a core: judge it by what a spin gets now
    t, c = time.perf_counter(), time.process_time()
    while time.perf_counter() - t < 0.2:
        pass
    avail = max(0.05, (time.process_time() - c) / (time.perf_counter() - t))
    return hs[:top], min(1.0, cpu / wall / avail) if wall > 0 else None


def _per_s(m) -> float:
    """Batches/s of a measured pass, after its first batch (start-up is not the rate)."""
    p = m.passes[0]
    return p.batches / p.epoch_s if p.batches < 2 or p.steady_s <= 0 else (
        (p.batches - 1) / p.steady_s)


def _verdict(bound, loader_bps, one, step_bps, cpu_share, hs, cores, nw) -> dict:
    """``{"knobs", "why"}``: chapter 09's arithmetic (workers = ceil(1.2 x step / one))."""
    top = (f"the data path's top hotspot is {hs[0]['name']} ({hs[0]['where']}, "
           f"{hs[0]['share']:.0%} of its time)") if hs else "no hotspot stands out"
    if step_bps is None:
        return {"knobs": {}, "why": f"no step given (--step-ms): a loader is only too slow for "
                f"a step. One process makes {one:,.1f} batches/s, this loader "
                f"{loader_bps:,.1f}; {top}"}
    if bound == "step":
        return {"knobs": {}, "why": f"the loader makes {loader_bps:,.1f} batches/s, "
                f"{loader_bps / step_bps:.1f}x what the step takes ({step_bps:,.1f}/s): the "
                "step is the bound, no loader knob speeds this loop up; profile the step"}
    if nw and one >= IN_PROCESS_RATIO * step_bps:
        return {"knobs": {"num_workers": 0}, "why": f"one process makes {one:,.0f} batches/s, "
                f"{one / step_bps:,.0f}x the step's {step_bps:,.1f}: loading in the loop costs "
                f"{1e3 / one:.2f} ms a batch, less than the workers' hand-over; {top}"}
    need = math.ceil(1.2 * step_bps / one)
    io = cpu_share is not None and cpu_share < IO_CPU_SHARE
    cap = 4 * cores if io else cores  # waiting work (sleep, I/O) needs no core per worker
    how = (f"one process makes {one:,.1f} batches/s, the step takes {step_bps:,.1f}/s: "
           f"ceil(1.2 x {step_bps:,.1f} / {one:,.1f}) = {need} workers; the data path is "
           f"{cpu_share:.0%} CPU" + (f" (waiting: workers beyond the {cores} cores help, up "
                                     f"to {cap})" if io else f" (one worker per core, {cores})"))
    if need > cap:
        return {"knobs": {"num_workers": cap} if nw is None or cap > nw else {},
                "why": f"{how}. No knob fixes this on {cores} cores: {top}; make that cheaper "
                "(or move it off the data path)"}
    if nw is not None and nw >= need:
        return {"knobs": {}, "why": f"{how}; it has {nw} already, yet it waits: the hand-over "
                f"to the main process or a start-up cost is the bound, not a knob; {top}"}
    return {"knobs": {"num_workers": need}, "why": f"{how}; {top}"}


def run_diagnose(target: str, *, step_ms: float | None = None, batches: int = 40,
                 timeline=None, time_limit_s: float | None = 120) -> Diagnosis:
    """The loader ``factory()`` returns (a DataLoader or any iterable of batches) diagnosed;
    ``step_ms``: a sleep (a GPU step the CPU waits on); ``timeline``: a PNG (DataLoaders only)."""
    if batches < 2:
        raise DiagnoseError(f"batches must be at least 2 (a rate needs two), not {batches}")
    if step_ms is not None and not step_ms > 0:
        raise DiagnoseError(f"the step must take a positive time in ms, not {step_ms}")
    before, cores = {p.pid for p in worker_processes()}, usable_cores()
    obj = src = inproc = None  # the loaders built here (see the finally below)
    limit = _Limit(time_limit_s, target)
    try:
        with limit:
            limit.phase = f"importing {target.rpartition(':')[0]!r}"
            factory = load_factory(target)
            limit.phase = f"calling {target}()"
            try:
                obj = factory()
            except DiagnoseError:
                raise
            except Exception as e:
                raise DiagnoseError(f"{target}() raised {type(e).__name__}: {e}") from e
            if not hasattr(obj, "__iter__"):
                raise DiagnoseError(f"{target}() returned a {type(obj).__name__}, not a "
                                    "DataLoader or other iterable of batches")
            is_dl = isinstance(obj, DataLoader)
            src = obj if is_dl else factory  # a generator can be iterated only once

            def run(what, loader, step=None):
                limit.phase = what
                try:
                    return measure(loader, repeats=1, warmup=0, max_batches=batches, step=step)
                except ValueError as e:
                    if "no batch" in str(e):
                        raise DiagnoseError(f"{target}(): the loader yielded no batches "
                                            f"({what})") from e
                    raise

            alone = run("measuring the loader alone", src)
            step = simulated_step(step_ms, "sleep") if step_ms else None
            step_bps = 1e3 / step_ms if step_ms else None
            wait = run(f"measuring the loader against a {step_ms:g} ms step", src,
                       step).wait_fraction if step else None
            loader_bps = _per_s(alone)
            if step_bps is None or wait is None or wait > LOADER_BOUND_WAIT:
                bound = "loader"  # a loop that only loads is bound by its loader
            elif wait < STEP_BOUND_WAIT and loader_bps >= STEP_BOUND_RATIO * step_bps:
                bound = "step"
            else:
                bound = "balanced"
            limit.phase = "profiling the data path in this process"
            # the same dataset, batches and collate in this process, where cProfile sees it
            inproc = same_batches(obj, obj.dataset, collate_fn=obj.collate_fn) if is_dl \
                else factory()
            hs, cpu_share = _hotspots(iter(inproc), max(2, min(batches, 20)))
            one = _per_s(run("measuring one process (num_workers=0)", inproc)) if is_dl \
                else loader_bps
            nw = obj.num_workers if is_dl else None
            suggestion = _verdict(bound, loader_bps, one, step_bps, cpu_share, hs, cores, nw)
            tl = None
            if timeline is not None and not is_dl:
                tl = f"not drawn: {target}() returns a {type(obj).__name__}, not a DataLoader"
            elif timeline is not None:
                limit.phase = "recording the timeline"
                drawn = record_timeline(obj, step=step, max_batches=min(batches, 40), name=target)
                Path(timeline).parent.mkdir(parents=True, exist_ok=True)
                Path(timeline).write_bytes(png_bytes(drawn.plot(), dpi=100))
                tl = str(timeline)
    finally:
        # drop the loaders built here (torch stops their workers); stop what still runs
        obj = src = inproc = None  # noqa: F841
        stop_processes([p for p in worker_processes() if p.pid not in before])
        gc.collect()  # spawn/forkserver queues keep named semaphores until collected
    d = Diagnosis(
        target=target, bound=bound, loader_batches_per_s=loader_bps, step_batches_per_s=step_bps,
        wait_fraction=wait, num_workers=nw, one_process_batches_per_s=one, cpu_share=cpu_share,
        first_batch_s=alone.first_batch_s, hotspots=hs, suggestion=suggestion, timeline=tl,
        samples_per_batch=alone.passes[0].samples / alone.passes[0].batches,
        tensors_per_batch=alone.tensors_per_batch,
        bytes_per_sample=alone.bytes_per_s / alone.samples_per_s if alone.samples_per_s else None)
    d.ceiling = place_loader(d)
    return d


def load_factory(spec: str):
    """``"module:function"`` or ``"path/to/file.py:function"`` -> the function."""
    module, sep, attr = spec.rpartition(":")
    if not sep or not module or not attr:
        raise DiagnoseError(f"{spec!r}: expected MODULE:FACTORY, e.g. mypkg.data:train_loader "
                            "or path/to/train.py:train_loader")
    if module.endswith(".py") or os.sep in module:
        path = Path(module).resolve()
        if not path.is_file():
            raise DiagnoseError(f"{spec!r}: no file {path}")
        # imported by its name from its folder, so spawn workers can import it too
        sys.path.insert(0, str(path.parent))
        module = path.stem
    elif "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # like `python -m`: the current folder's modules
    try:
        mod = importlib.import_module(module)
    except DiagnoseError:
        raise
    except BaseException as e:  # SyntaxError, SystemExit from a script's top level, ...
        raise DiagnoseError(f"{spec!r}: importing {module!r} failed: "
                            f"{type(e).__name__}: {e}") from e
    fn = getattr(mod, attr, None)
    if fn is None:
        raise DiagnoseError(f"{spec!r}: module {module!r} has no {attr!r}")
    if not callable(fn):
        raise DiagnoseError(f"{spec!r}: {attr!r} is a {type(fn).__name__}, not a callable "
                            "returning a loader")
    return fn


def place_loader(d: Diagnosis) -> dict:
    """The ceiling a diagnosed loader runs under: the lower of its own work x its processes
    and, with workers, the ``handover`` ceiling; ``{}`` without a batch size or rate."""
    if not (d.samples_per_batch and d.one_process_batches_per_s and d.loader_batches_per_s):
        return {}
    nw = d.num_workers or 0
    procs = min(nw, usable_cores()) if nw else 1
    limits = {"own_work": d.one_process_batches_per_s * d.samples_per_batch * procs}
    labels = {"own_work": f"its own work per sample x {procs} process(es)",
              "handover": "a batch handed over from a worker"}
    handover = measure_ceilings(["handover"])["handover"] if nw else None
    if handover is not None and handover.rate:
        limits["handover"] = handover.rate * d.samples_per_batch
    bound = min(limits, key=limits.get)
    measured = d.loader_batches_per_s * d.samples_per_batch
    return {"bound": bound, "label": labels[bound], "limit": limits[bound],
            "fraction": measured / limits[bound], "predicted": limits[bound],
            "how": f"the lowest of {', '.join(limits)}", "limits": limits,
            "missing": {"handover": handover.why} if handover and not handover.rate else {}}
