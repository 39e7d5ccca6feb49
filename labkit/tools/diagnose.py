"""``labkit diagnose MODULE:FACTORY``: ``lk.profiling.diagnose`` from the command line (ch. 13).

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


def run_diagnose(spec: str, **kw: Any) -> Diagnosis:
    """:func:`diagnose` on ``"module:factory"`` (what ``labkit diagnose`` runs)."""
    limit = DiagnoseLimit(kw.get("time_limit_s", 120), spec)
    with limit:
        limit.phase = f"importing {spec.rpartition(':')[0]!r}"
        factory = load_factory(spec)
    return diagnose(factory, target=spec, **kw)
