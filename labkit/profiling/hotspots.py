"""Where a data path spends its time: cProfile in this process, hotspots by share (chapter 13).

A worker is another process, so the deterministic profiler cannot see into it; the same
dataset and collate run in this process with ``num_workers=0`` can be seen. Time spent in a
built-in (``time.sleep``, a C decoder, ``file.read``) is charged to the Python function that
called it, so a hotspot always names a line of the learner's code, not ``<built-in ...>``.
"""

from __future__ import annotations

import cProfile
import os
import pstats
import time
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

#: Frames from these files are the loader's machinery, not the learner's data path (collate
#: is not among them: a heavy default_collate is a hotspot worth naming).
_MACHINERY = tuple(os.path.join(*parts) for parts in [
    ("torch", "utils", "data", "dataloader.py"), ("torch", "utils", "data", "sampler.py"),
    ("torch", "utils", "data", "_utils", "fetch.py"), ("torch", "autograd", "profiler.py"),
    ("torch", "_ops.py"), ("labkit", "profiling", ""), ("labkit", "loading", "loaders.py"),
    ("cProfile",), ("pstats",)])


@dataclass(frozen=True)
class Hotspot:
    """One function of the data path and its share of the profiled time."""

    name: str
    where: str    # file:line
    share: float  # of the profiled wall time (self time, built-ins it called included)
    via: str = ""  # the built-in that took most of it, if one did

    def as_dict(self) -> dict:
        return {"name": self.name, "where": self.where, "share": round(self.share, 4),
                "via": self.via}

    def __str__(self) -> str:
        via = f" (in {self.via})" if self.via else ""
        return f"{self.share:6.1%}  {self.name}{via}  {self.where}"


def _qualname(filename: str, lineno: int, name: str, _cache: dict = {}) -> str:  # noqa: B006
    """``Class.method`` for a method (cProfile keeps only ``method``); else ``name``."""
    import ast

    if filename not in _cache:
        try:
            tree = ast.parse(Path(filename).read_text())
        except (OSError, SyntaxError, ValueError):
            tree = None
        found: dict = {}

        def walk(node, prefix):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    q = f"{prefix}{child.name}"
                    first = min([child.lineno] + [d.lineno for d in child.decorator_list])
                    found[first] = found[child.lineno] = q
                    walk(child, q + "." if isinstance(child, ast.ClassDef) else q + ".<locals>.")
                else:
                    walk(child, prefix)

        if tree is not None:
            walk(tree, "")
        _cache[filename] = found
    q = _cache[filename].get(lineno)
    return q if q and q.rsplit(".", 1)[-1] == name else name


def _is_builtin(func) -> bool:
    return func[0] == "~" or func[0].startswith("<")


def hotspots_from_stats(stats: pstats.Stats, total_s: float, top: int = 5) -> list[Hotspot]:
    """Rank functions by self time, each built-in's time charged to its callers."""
    self_s: dict = {}
    via: dict = {}
    for func, (_cc, _nc, tt, _ct, callers) in stats.stats.items():
        if not _is_builtin(func):
            self_s[func] = self_s.get(func, 0.0) + tt
            continue
        # a built-in: its time goes to the callers, in proportion to what each call took
        total_edge = sum(v[2] for v in callers.values()) or 1.0
        for caller, edge in callers.items():
            share = tt * edge[2] / total_edge
            self_s[caller] = self_s.get(caller, 0.0) + share
            if share > via.get(caller, ("", 0.0))[1]:
                via[caller] = (func[2], share)
    out = []
    for func, s in sorted(self_s.items(), key=lambda kv: -kv[1]):
        if _is_builtin(func) or any(m in func[0] for m in _MACHINERY):
            continue
        v = via.get(func, ("", 0.0))
        out.append(Hotspot(name=_qualname(func[0], func[1], func[2]),
                           where=f"{func[0]}:{func[1]}", share=s / total_s,
                           via=v[0] if v[1] > 0.5 * s else ""))
        if len(out) == top:
            break
    return out


def profile_in_process(iterable, batches: int, top: int = 5) -> tuple[list[Hotspot], dict]:
    """Iterate ``batches`` batches of ``iterable`` under cProfile; its hotspots and timings.

    Give it a loader with ``num_workers=0`` (see :func:`rebuild_loader`): with workers, the work
    happens in other processes and this profile sees only the waiting. Returns the hotspots
    and ``{"wall_s", "cpu_s", "batches"}`` (CPU over wall says how much is CPU work and
    how much is waiting: sleep, I/O).
    """
    prof = cProfile.Profile()
    n = 0
    wall, cpu = time.perf_counter(), time.process_time()
    prof.enable()
    try:
        for _ in islice(iterable, batches):
            n += 1
    finally:
        prof.disable()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return hotspots_from_stats(pstats.Stats(prof), wall, top), {
        "wall_s": wall, "cpu_s": cpu, "batches": n}
