"""``labkit diagnose MODULE:FACTORY``: ``lk.profiling.diagnose`` from the command line (ch. 13).

It adds what the chapter folder cannot import: the roofline (:mod:`.roofline`), which names
the ceiling the loader runs under and how far below it.

The factory is imported by its module name (a file's folder goes on ``sys.path`` first), so
spawn workers can import it too; the whole diagnosis runs under one wall-clock limit.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any

from ..profiling.checklist import DiagnoseLimit, diagnose
from ..profiling.diagnosis import DiagnoseError, Diagnosis
from .roofline import measure


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
    """The roofline's verdict on a diagnosed loader: which ceiling it runs under, how far.

    Its own work per sample is what one process delivered (``num_workers=0``): the workers
    multiply it by ``min(num_workers, cores)``. With workers, every batch is also handed
    over to the loop (per batch, per tensor past the first, and per byte: :mod:`.ceilings`,
    measured now). ``{}`` when the loader's figures do not allow it (no batch size, not a
    rate)."""
    if not (d.samples_per_batch and d.one_process_batches_per_s and d.loader_batches_per_s):
        return {}
    nw = d.num_workers or 0
    more = (d.tensors_per_batch or 1) - 1   # tensors past the first: each crosses on its own
    roof = measure(["handover_batch", "handover_bytes"] + (["handover_tensor"] if more else [])
                   if nw else [])
    roof.add("own_work", "its own work per sample",
             [d.one_process_batches_per_s * d.samples_per_batch], where="core",
             how="the loader in one process (num_workers=0)")
    work = {"own_work": 1.0}
    if nw:
        work["handover_batch"] = 1 / d.samples_per_batch
        if more:
            work["handover_tensor"] = more / d.samples_per_batch
        if d.bytes_per_sample:
            work["handover_bytes"] = d.bytes_per_sample
    p = roof.place(d.target, work, workers=nw, in_workers=["own_work"] if nw else (),
                   measured=d.loader_batches_per_s * d.samples_per_batch,
                   bytes_per_sample=d.bytes_per_sample)
    return {"bound": p.bound, "label": p.labels[p.bound], "limit": p.limits[p.bound],
            "fraction": p.fraction, "predicted": p.predicted, "how": p.predicted_by,
            "limits": p.limits, "missing": p.missing}
