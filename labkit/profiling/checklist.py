"""Diagnose any loader: find the bound, name the hotspot, suggest a knob, verify it (chapter 13).

The tuning checklist as one procedure, for a loader the kit did not build: measure the
loader alone and against the step it must feed, decide what bounds the loop, profile the
data path in this process (``num_workers=0``, cProfile) to name its hotspot, suggest knobs
with :func:`lk.instruments.suggest_loader` (or say what no knob can fix), then apply the suggestion
and measure again. ``labkit diagnose MODULE:FACTORY`` runs it from the command line
(:mod:`labkit.tools.diagnose`).
"""

from __future__ import annotations

import gc
import inspect
import os
import signal
import threading
import warnings
from pathlib import Path

from ..facilities import usable_cores
from ..instruments.measurement import rate
from ..instruments.meter import measure, simulated_step
from ..loading.loaders import worker_processes
from ..loading.processes import stop_processes
from ..optional import status
from .advice import classify, cpu_available, startup_note, suggest_knobs
from .diagnosis import DiagnoseError, Diagnosis
from .hotspots import profile_in_process
from .lanes import timeline_png
from .rebuild import rebuild_loader
from .sampling import sample_workers
from .timeline import record_timeline


class DiagnoseLimit:
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
    p = m.passes[0]
    if p.batches > 1 and p.steady_s > 0:
        return rate(p.batches - 1, p.steady_s)
    return rate(p.batches, p.epoch_s)


def _loop_batches_per_s(m) -> float:
    return _batches_per_s(m)



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

    target = target or getattr(factory, "__qualname__", repr(factory))
    if batches < 2:
        raise DiagnoseError(f"batches must be at least 2 (a rate needs two), not {batches}")
    if step_ms is not None and not step_ms > 0:
        raise DiagnoseError(f"the step must take a positive time in ms, not {step_ms}")
    before = {p.pid for p in worker_processes()}
    cores = cores or usable_cores()
    obj = src = inproc = new = None  # the loaders built here (see the finally below)
    limit = DiagnoseLimit(time_limit_s, target)
    try:
        with limit:
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
            nw = obj.num_workers if is_dl else None
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
            first = alone.passes[0]
            per_batch = first.samples / first.batches if first.batches else None
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
            worker_top, worker_how = [], ""
            if is_dl and obj.num_workers > 0:
                limit.phase = "sampling the workers (py-spy)"
                worker_top, worker_how = _sample_workers(obj, step)

            suggestion = suggest_knobs(bound, loader_bps, one, step_bps, cpu_share, hs, cores,
                                  obj.num_workers if is_dl else None, p99)
            startup = startup_note(obj, alone.first_batch_s, loader_bps) if is_dl else None
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
                with warnings.catch_warnings():  # more workers than cores: on purpose
                    warnings.simplefilter("ignore", UserWarning)
                    new, how_v = _apply(factory, obj, knobs, rebuild_loader)
                    # persistent workers are for the epochs after the first: measure one
                    after = None if new is None else run(
                        "verifying the suggestion", new, step=step,
                        warmup=int(bool(knobs.get("persistent_workers"))))
                if new is None:
                    verified["how"] = how_v
                else:
                    verified = {"done": True, "how": how_v, "knobs": knobs,
                                "wait_fraction_before": wait,
                                "wait_fraction_after": after.wait_fraction,
                                "loop_batches_per_s_before": _loop_batches_per_s(fed),
                                "loop_batches_per_s_after": _loop_batches_per_s(after),
                                "bound_after": classify(after.wait_fraction,
                                                        _batches_per_s(after), step_bps)}
                    new = None  # the last reference: torch stops its workers
            tl_path = None
            if timeline is not None:
                limit.phase = "recording the timeline"
                tl_path = _timeline(obj, is_dl, step, batches, timeline, target)
    finally:
        # drop every reference to the loaders built here: torch stops their workers (a
        # persistent loader's too); whatever still runs after that is stopped by force
        obj = src = inproc = new = None  # noqa: F841
        stop_processes([p for p in worker_processes() if p.pid not in before])
        # spawn/forkserver queues keep named semaphores in /dev/shm until they are collected
        gc.collect()
    return Diagnosis(target=target, bound=bound, loader_batches_per_s=loader_bps,
                     step_batches_per_s=step_bps, wait_fraction=wait,
                     num_workers=nw,
                     one_process_batches_per_s=one, cpu_share=cpu_share,
                     first_batch_s=alone.first_batch_s, hotspots=hs,
                     hotspots_how=how, worker_hotspots=worker_top,
                     worker_sampling=worker_how, suggestion=suggestion, verified=verified,
                     timeline=tl_path, samples_per_batch=per_batch,
                     tensors_per_batch=alone.tensors_per_batch,
                     bytes_per_sample=alone.bytes_per_s / alone.samples_per_s
                     if alone.samples_per_s else None)


def _sample_workers(loader, step) -> tuple[list, str]:
    """The workers' innermost frames by share (py-spy, one second), or why there are none."""
    ok, why = status("pyspy")
    if not ok:
        return [], f"not sampled: {why}; the in-process profile above stands in for them"
    ws = sample_workers(loader, seconds=1, step=step)
    return [{"frame": f, "share": round(s, 4)} for f, s in ws.top(5)], ws.how


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
    if not is_dl:
        return f"not drawn: {target}() returns a {type(obj).__name__}, not a DataLoader"
    tl = record_timeline(obj, step=step, max_batches=min(batches, 40), name=target)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(timeline_png(tl))
    return str(path)
