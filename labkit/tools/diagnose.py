"""``labkit diagnose MODULE:FACTORY``: ``lk.profiling.diagnose`` from the command line (ch. 13).

It adds what the chapter folder cannot import: the ceiling the loader runs under and how far
below it (its own work, or the hand-over that :mod:`labkit.ceilings` measures).

The factory is imported by its module name (a file's folder goes on ``sys.path`` first), so
spawn workers can import it too; the whole diagnosis runs under one wall-clock limit.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any

from ..ceilings import measure_ceilings
from ..facilities import usable_cores
from ..profiling.checklist import DiagnoseLimit, diagnose
from ..profiling.diagnosis import DiagnoseError, Diagnosis


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


def run_diagnose(spec: str, *, roofline: bool = True, **kw: Any) -> Diagnosis:
    """:func:`diagnose` on ``"module:factory"`` (what ``labkit diagnose`` runs), then, with
    ``roofline``, the ceiling the loader runs under (:func:`place_loader`)."""
    limit = DiagnoseLimit(kw.get("time_limit_s", 120), spec)
    with limit:
        limit.phase = f"importing {spec.rpartition(':')[0]!r}"
        factory = load_factory(spec)
    d = diagnose(factory, target=spec, **kw)
    if roofline:
        d.ceiling = place_loader(d)
    return d


def place_loader(d: Diagnosis) -> dict:
    """The ceiling a diagnosed loader runs under, and how far below it.

    Its own work allows what one process delivered (``num_workers=0``) times
    ``min(num_workers, cores)``; with workers, each batch is also handed over to the loop,
    which allows the ``handover`` ceiling's batches/s (measured now) times the batch size. The
    lower binds. ``{}`` when the loader's figures do not allow it (no batch size, no rate)."""
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
