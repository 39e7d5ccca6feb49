"""The bound, the knobs and why: diagnose's rules, each a number you can read (chapter 13).

:func:`classify` names what bounds a loop from its measured wait fraction and rates;
:func:`suggest_knobs` turns the measurements into knobs with :func:`lk.instruments.suggest_loader`'s
arithmetic (or says what no knob can fix); :func:`startup_note` explains a slow first batch.
"""

from __future__ import annotations

import math

from ..instruments.tuning import suggest_loader

#: A loop waiting for data more than this share of its time is loader-bound.
LOADER_BOUND_WAIT = 0.25
#: ... and less than this, with the loader this many times faster than the step: step-bound.
STEP_BOUND_WAIT, STEP_BOUND_RATIO = 0.10, 1.5
#: One process this many times faster than the step: workers cost more than they give.
IN_PROCESS_RATIO = 10
#: Data-path work that is less than this share CPU (sleep, I/O) needs no core per worker.
IO_CPU_SHARE = 0.5


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


def suggest_knobs(bound, loader_bps, one_bps, step_bps, cpu_share, hs, cores, nw, p99) -> dict:
    """``{"knobs": {...}, "why": "..."}`` for a loop with this bound and these rates.

    ``one_bps``: one process's batches/s (num_workers=0); ``nw``: the loader's num_workers
    (None: not a DataLoader); ``hs``: the data path's hotspots; ``p99``: a slow batch (s).
    """
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


def startup_note(loader, first_s: float, loader_bps: float) -> str | None:
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

