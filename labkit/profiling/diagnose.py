"""Diagnose any loader: find the bound, name the hotspot, suggest a knob, verify it (chapter 13).

The tuning checklist as one procedure, for a loader the kit did not build: measure the
loader alone and against the step it must feed, decide what bounds the loop, profile the
data path in this process (``num_workers=0``, cProfile) to name its hotspot, suggest knobs
with :func:`lk.suggest_loader` (or say what no knob can fix), then apply the suggestion
and measure again. ``labkit diagnose MODULE:FACTORY`` runs it from the command line.
"""

from __future__ import annotations

import gc
import importlib
import inspect
import math
import os
import signal
import sys
import threading
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import LabkitError
from .hotspots import Hotspot

#: A loop waiting for data more than this share of its time is loader-bound.
LOADER_BOUND_WAIT = 0.25
#: ... and less than this, with the loader this many times faster than the step: step-bound.
STEP_BOUND_WAIT, STEP_BOUND_RATIO = 0.10, 1.5
#: One process this many times faster than the step: workers cost more than they give.
IN_PROCESS_RATIO = 10
#: Data-path work that is less than this share CPU (sleep, I/O) needs no core per worker.
IO_CPU_SHARE = 0.5


class DiagnoseError(LabkitError):
    """The loader to diagnose could not be built, iterated or measured (the message says which)."""


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
    hotspots: list[Hotspot] = field(default_factory=list)
    hotspots_how: str = ""
    suggestion: dict = field(default_factory=dict)   # {"knobs": {...}, "why": "..."}
    verified: dict = field(default_factory=dict)     # {"done": bool, "how": "...", ...}
    timeline: str | None = None

    def as_dict(self) -> dict:
        d = {k: getattr(self, k) for k in (
            "target", "bound", "loader_batches_per_s", "step_batches_per_s", "wait_fraction",
            "num_workers", "one_process_batches_per_s", "cpu_share", "first_batch_s",
            "hotspots_how",
            "suggestion", "verified", "timeline")}
        d["hotspots"] = [h.as_dict() for h in self.hotspots]
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in d.items()}

    def as_observations(self, name: str | None = None, config: dict | None = None) -> list:
        """Observations for a checkpoint: rates, wait fraction, the bound (``ckpt.add``)."""
        from ..records.checkpoint import observation_name

        n = observation_name(name or f"diagnose.{self.target}")
        cfg = {"num_workers": self.num_workers, **(config or {})}
        obs = [{"name": f"{n}.bound", "value": self.bound, "unit": "", "config": cfg,
                "note": self.suggestion.get("why")},
               {"name": f"{n}.loader_batches_per_s", "value": round(self.loader_batches_per_s, 2),
                "unit": "batches/s", "config": cfg, "note": None}]
        if self.wait_fraction is not None and not math.isnan(self.wait_fraction):
            obs.append({"name": f"{n}.wait_fraction", "value": round(self.wait_fraction, 4),
                        "unit": "fraction", "config": cfg, "note": "data-wait / loop time"})
        after = self.verified.get("wait_fraction_after")
        if after is not None:
            obs.append({"name": f"{n}.verified_wait_fraction", "value": round(after, 4),
                        "unit": "fraction", "config": {**cfg, **self.suggestion.get("knobs", {})},
                        "note": self.verified.get("how")})
        return obs

    def __str__(self) -> str:
        def f(x, fmt="{:,.1f}"):
            return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else fmt.format(x)

        lines = [f"diagnose {self.target}",
                 f"  bound:                 {self.bound}",
                 f"  loader_batches_per_s:  {f(self.loader_batches_per_s)}"
                 f"  (num_workers={self.num_workers if self.num_workers is not None else 'n/a'};"
                 f" one process: {f(self.one_process_batches_per_s)})",
                 f"  step_batches_per_s:    {f(self.step_batches_per_s)}",
                 f"  wait_fraction:         {f(self.wait_fraction, '{:.1%}')}",
                 f"  data path CPU share:   {f(self.cpu_share, '{:.0%}')}",
                 f"  first batch:           {f(self.first_batch_s, '{:.2f} s')}",
                 f"  hotspots ({self.hotspots_how}):"]
        lines += [f"    {h}" for h in self.hotspots] or ["    none found"]
        knobs = self.suggestion.get("knobs") or {}
        lines.append(f"  suggestion:            {knobs or 'no knob'}")
        lines.append(f"    why: {self.suggestion.get('why', '')}")
        if self.suggestion.get("startup"):
            lines.append(f"    start-up: {self.suggestion['startup']}")
        v = self.verified
        if v.get("done"):
            lines.append(f"  verified:              wait_fraction "
                         f"{f(v['wait_fraction_before'], '{:.1%}')}"
                         f" -> {f(v['wait_fraction_after'], '{:.1%}')}, loop "
                         f"{f(v['loop_batches_per_s_before'])} -> "
                         f"{f(v['loop_batches_per_s_after'])} batches/s, bound after: "
                         f"{v['bound_after']} ({v['how']})")
        else:
            lines.append(f"  verified:              no: {v.get('how', '')}")
        if self.timeline:
            lines.append(f"  timeline:              {self.timeline}")
        return "\n".join(lines)


def load_factory(spec: str):
    """``"module:function"`` or ``"path/to/file.py:function"`` -> the function."""
    module, sep, attr = spec.rpartition(":")
    if not sep or not module or not attr:
        raise DiagnoseError(f"{spec!r}: expected MODULE:FACTORY, e.g. mypkg.data:make_loader "
                            "or path/to/train.py:make_loader")
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


class _Limit:
    """A wall-clock limit on the whole diagnosis; the error names the phase that overran."""

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


def _batches_per_s(m) -> float:
    from ..instruments.measurement import rate

    p = m.passes[0]
    if p.batches > 1 and p.steady_s > 0:
        return rate(p.batches - 1, p.steady_s)
    return rate(p.batches, p.epoch_s)


def _loop_batches_per_s(m) -> float:
    return _batches_per_s(m)


def cpu_available(seconds: float = 0.2) -> float:
    """Share of a core this process gets while spinning ``seconds`` (1.0 on an idle machine)."""
    import time

    wall, cpu = time.perf_counter(), time.process_time()
    while time.perf_counter() - wall < seconds:
        pass
    return max(0.05, (time.process_time() - cpu) / (time.perf_counter() - wall))


def classify(wait: float | None, loader_bps: float, step_bps: float | None) -> str:
    """The bound from the measured wait fraction and the two rates (see the constants)."""
    if step_bps is None or wait is None or math.isnan(wait):
        return "loader"  # a loop that only loads is bound by the loader by definition
    if wait > LOADER_BOUND_WAIT:
        return "loader"
    if wait < STEP_BOUND_WAIT and loader_bps >= STEP_BOUND_RATIO * step_bps:
        return "step"
    return "balanced"


def diagnose(factory, *, step_ms: float | None = None, batches: int = 40,
             timeline: str | os.PathLike | None = None, time_limit_s: float | None = 120,
             target: str | None = None, cores: int | None = None) -> Diagnosis:
    """Diagnose the loader ``factory()`` returns (a DataLoader or any iterable of batches).

    Args:
        factory: a zero-argument callable returning the loader; called again for each
            pass when the loader cannot be iterated twice, and with knob keywords to verify
            the suggestion when it accepts them.
        step_ms: the training step to feed, simulated as a sleep (a GPU step the CPU waits
            on); None: the loader alone.
        batches: batches per measured pass.
        timeline: write a per-batch timeline PNG here (DataLoaders only).
        time_limit_s: the whole diagnosis, or :class:`DiagnoseError` naming the phase.
        cores: the cores workers may use (default :func:`lk.usable_cores`).
    """
    from torch.utils.data import DataLoader

    from ..instruments.measurement import rate
    from ..instruments.meter import measure, simulated_step
    from ..loading.loaders import shutdown, worker_processes
    from ..loading.processes import stop_processes
    from ..studies.tuning import suggest_loader, usable_cores
    from .hotspots import profile_in_process
    from .rebuild import rebuild_loader

    target = target or getattr(factory, "__qualname__", repr(factory))
    if batches < 2:
        raise DiagnoseError(f"batches must be at least 2 (a rate needs two), not {batches}")
    if step_ms is not None and not step_ms > 0:
        raise DiagnoseError(f"the step must take a positive time in ms, not {step_ms}")
    before = {p.pid for p in worker_processes()}
    cores = cores or usable_cores()
    built: list = []
    limit = _Limit(time_limit_s, target)
    try:
        with limit:
            limit.phase = f"calling {target}()"
            try:
                obj = factory()
            except DiagnoseError:
                raise
            except Exception as e:
                raise DiagnoseError(f"{target}() raised {type(e).__name__}: {e}") from e
            built.append(obj)
            if not hasattr(obj, "__iter__"):
                raise DiagnoseError(f"{target}() returned a {type(obj).__name__}, not a "
                                    "DataLoader or other iterable of batches")
            is_dl = isinstance(obj, DataLoader)
            src = obj if is_dl else factory  # a generator can be iterated only once

            def run(what, loader, **kw):
                limit.phase = what
                try:
                    kw.setdefault("warmup", 0)
                    return measure(loader, repeats=1, max_batches=batches, **kw)
                except ValueError as e:
                    if "no batch" in str(e):
                        raise DiagnoseError(f"{target}(): the loader yielded no batches "
                                            f"({what})") from e
                    raise

            alone = run("measuring the loader alone", src)
            loader_bps = _batches_per_s(alone)
            step = simulated_step(step_ms, "sleep") if step_ms else None
            step_bps = rate(1e3, step_ms) if step_ms else None
            fed = run(f"measuring the loader against a {step_ms:g} ms step", src,
                      step=step) if step else None
            wait = fed.wait_fraction if fed else None
            bound = classify(wait, loader_bps, step_bps)

            # the data path in this process, where cProfile can see it
            limit.phase = "profiling the data path in this process"
            inproc = rebuild_loader(obj, num_workers=0) if is_dl else factory()
            how = "cProfile, this process, num_workers=0" if is_dl else "cProfile, this process"
            hs, t = profile_in_process(iter(inproc), max(2, min(batches, 20)))
            # on a busy machine CPU work gets less than a core: judge against what it can get
            avail = cpu_available()
            cpu_share = min(1.0, t["cpu_s"] / t["wall_s"] / avail) if t["wall_s"] > 0 else None
            one = _batches_per_s(run("measuring one process (num_workers=0)", inproc)) \
                if is_dl else loader_bps
            p99 = alone.latency_ms(99) / 1e3 if not is_dl or obj.num_workers == 0 else None

            suggestion = _suggest(bound, loader_bps, one, step_bps, cpu_share, hs, cores,
                                  obj.num_workers if is_dl else None, p99, suggest_loader)
            startup = _startup(obj, alone.first_batch_s, loader_bps) if is_dl else None
            if startup:
                suggestion["startup"] = startup
                if (not obj.persistent_workers and step is not None
                        and suggestion["knobs"].get("num_workers", obj.num_workers) > 0):
                    suggestion["knobs"] = {**(suggestion["knobs"] or
                                              {"num_workers": obj.num_workers}),
                                           "persistent_workers": True}
            verified = {"done": False, "how": "nothing to apply: no knob was suggested"}
            knobs = suggestion["knobs"]
            if knobs and step is not None:
                limit.phase = "verifying the suggestion"
                new, how_v = _apply(factory, obj, knobs, rebuild_loader)
                if new is None:
                    verified["how"] = how_v
                else:
                    built.append(new)
                    with warnings.catch_warnings():  # more workers than cores: on purpose
                        warnings.simplefilter("ignore", UserWarning)
                        # persistent workers are for the epochs after the first: measure one
                    after = run("verifying the suggestion", new, step=step,
                                warmup=int(bool(knobs.get("persistent_workers"))))
                    verified = {"done": True, "how": how_v, "knobs": knobs,
                                "wait_fraction_before": wait,
                                "wait_fraction_after": after.wait_fraction,
                                "loop_batches_per_s_before": _loop_batches_per_s(fed),
                                "loop_batches_per_s_after": _loop_batches_per_s(after),
                                "bound_after": classify(after.wait_fraction,
                                                        _batches_per_s(after), step_bps)}
                    shutdown(new)
            tl_path = None
            if timeline is not None:
                limit.phase = "recording the timeline"
                tl_path = _timeline(obj, is_dl, step, batches, timeline, target)
    finally:
        for b in built:
            shutdown(b)
        built.clear()
        stop_processes([p for p in worker_processes() if p.pid not in before])
        # spawn/forkserver queues keep named semaphores in /dev/shm until they are collected
        gc.collect()
    return Diagnosis(target=target, bound=bound, loader_batches_per_s=loader_bps,
                     step_batches_per_s=step_bps, wait_fraction=wait,
                     num_workers=obj.num_workers if is_dl else None,
                     one_process_batches_per_s=one, cpu_share=cpu_share,
                     first_batch_s=alone.first_batch_s, hotspots=hs,
                     hotspots_how=how, suggestion=suggestion, verified=verified,
                     timeline=tl_path)


def _suggest(bound, loader_bps, one_bps, step_bps, cpu_share, hs, cores, nw, p99,
             suggest_loader) -> dict:
    top = (f"the data path's top hotspot is {hs[0].name} ({hs[0].where}, {hs[0].share:.0%} "
           "of its time)") if hs else "no hotspot stands out"
    if step_bps is None:
        return {"knobs": {}, "why": (
            f"no step given (--step-ms): a loader is only too slow for a step. One process "
            f"makes {one_bps:,.1f} batches/s, this loader {loader_bps:,.1f}; {top}")}
    if bound == "step":
        s = suggest_loader(one_bps, step_bps, cores=cores)
        fewer = (f"; {s.num_workers} worker(s) would keep up and free cores"
                 if nw is not None and s.num_workers < nw else "")
        return {"knobs": {}, "why": (
            f"the loader makes {loader_bps:,.1f} batches/s, {loader_bps / step_bps:.1f}x what "
            f"the step takes ({step_bps:,.1f}/s): the step is the bound, no loader knob speeds "
            f"this loop up; profile the step{fewer}")}
    if nw and one_bps >= IN_PROCESS_RATIO * step_bps:
        return {"knobs": {"num_workers": 0}, "why": (
            f"one process makes {one_bps:,.0f} batches/s, {one_bps / step_bps:,.0f}x the "
            f"step's {step_bps:,.1f}: loading in the loop costs "
            f"{1e3 / one_bps:.2f} ms a batch, less than the workers' hand-over and start-up "
            f"cost; num_workers=0. {top}")}
    io = cpu_share is not None and cpu_share < IO_CPU_SHARE
    cap = 4 * cores if io else cores  # waiting work (sleep, I/O) needs no core per worker
    s = suggest_loader(one_bps, step_bps, cores=cap, batch_time_p99_s=p99)
    kind = (f"the data path is {cpu_share:.0%} CPU (mostly waiting: workers beyond the "
            f"{cores} cores still help, capped at {cap})" if io else
            f"the data path is {cpu_share:.0%} CPU: one worker per core at most ({cores})")
    if s.limited_by == "cores":
        why = (f"{s.reason}. No knob fixes this on {cores} cores: {top}; make that cheaper "
               "(or move it off the data path)")
        knobs = s.loader_kwargs() if nw is None or s.num_workers > nw else {}
    elif nw is not None and nw >= s.num_workers:
        why = (f"it already has {nw} workers, as many as {s.num_workers} the arithmetic asks "
               f"for ({s.reason}), yet it waits: the per-batch hand-over to the main process "
               f"or a start-up cost is the bound, not a knob; {top}")
        knobs = {}
    else:
        why, knobs = f"{s.reason}; {kind}; {top}", s.loader_kwargs()
    return {"knobs": knobs, "why": why}


#: A first batch slower than this many steady batches (and than 1 s) is a start-up cost.
STARTUP_BATCHES, STARTUP_MIN_S = 20, 1.0


def _startup(loader, first_s: float, loader_bps: float) -> str | None:
    """What the first batch's wait says, when worker start-up dominates it; else None."""
    import multiprocessing
    import pickle

    if loader.num_workers == 0 or first_s < max(STARTUP_MIN_S, STARTUP_BATCHES / loader_bps):
        return None
    ctx = loader.multiprocessing_context
    method = (ctx if isinstance(ctx, str) else ctx.get_start_method() if ctx is not None
              else multiprocessing.get_start_method())
    what = f"{loader.num_workers} {method} worker{'s' if loader.num_workers > 1 else ''} start"
    if method in ("spawn", "forkserver"):
        try:
            mb = len(pickle.dumps(loader.dataset, protocol=pickle.HIGHEST_PROTOCOL)) / 1e6
        except Exception as e:  # an unpicklable dataset fails in the worker, not here
            mb, what = None, what + f" (the dataset does not pickle: {type(e).__name__})"
        if mb is not None:
            what += (f", each importing torch and unpickling the dataset ({mb:,.1f} MB "
                     "pickled)")
            if mb > 10:
                what += ("; keep the dataset object small (paths and offsets, open files "
                         "lazily in the worker) or use fork")
    return (f"the first batch took {first_s:.1f} s, {first_s * loader_bps:,.0f} batches' worth: "
            f"{what}. Without persistent_workers=True every epoch pays it again")


def _apply(factory, obj, knobs, rebuild_loader):
    """The loader with ``knobs`` applied, and how; (None, why not) when it cannot be."""
    from torch.utils.data import DataLoader

    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}
    takes = any(p.kind is p.VAR_KEYWORD for p in params.values()) or all(
        k in params for k in knobs)
    if takes:
        try:
            return factory(**knobs), f"called the factory with {knobs}"
        except TypeError:
            pass
    if isinstance(obj, DataLoader):
        return rebuild_loader(obj, **knobs), ("rebuilt the DataLoader with the knobs (same "
                                              "dataset, sampler, collate_fn)")
    return None, (f"cannot: the factory returns a {type(obj).__name__}, not a DataLoader, and "
                  f"takes no {', '.join(knobs)} arguments; apply the knobs where the loader "
                  "is built and diagnose again")


def _timeline(obj, is_dl, step, batches, path, target) -> str:
    from .lanes import timeline_png
    from .timeline import record_timeline

    if not is_dl:
        return f"not drawn: {target}() returns a {type(obj).__name__}, not a DataLoader"
    tl = record_timeline(obj, step=step, max_batches=min(batches, 40), name=target)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(timeline_png(tl))
    return str(path)


def run_diagnose(spec: str, **kw: Any) -> Diagnosis:
    """:func:`diagnose` on ``"module:factory"`` (what ``labkit diagnose`` runs)."""
    limit = _Limit(kw.get("time_limit_s", 120), spec)
    with limit:
        limit.phase = f"importing {spec.rpartition(':')[0]!r}"
        factory = load_factory(spec)
    return diagnose(factory, target=spec, **kw)
