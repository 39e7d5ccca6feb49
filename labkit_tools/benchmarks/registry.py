"""The benchmark registry and its printout (the benchmarks of chapters 02, 06, 09, 10, 11).

A benchmark returns a JSON-ready dict of figures; a judged figure comes with ``NAME_ci``,
``NAME_ci_level`` and ``NAME_verdict`` (``labkit.instruments.stats.judge``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from labkit.instruments.stats import PASS, overall
from labkit.records.checkpoint import Checkpoint
from labkit.records.table import text_table

BENCHMARKS: dict[str, Callable[..., dict]] = {}


def benchmark(name: str, goal: str):
    """Register a benchmark function under ``name``; ``goal`` says what passing means."""

    def wrap(fn):
        fn.goal = goal
        BENCHMARKS[name] = fn
        return fn

    return wrap


def run_benchmark(name: str, **kwargs) -> dict:
    """The named benchmark's figures, with a ``verdict`` (:func:`overall`) and ``goal_met``."""
    if name not in BENCHMARKS:
        raise KeyError(f"no benchmark named {name!r}; available: {', '.join(sorted(BENCHMARKS))}")
    fn = BENCHMARKS[name]
    result = {"benchmark": name, "goal": fn.goal, **fn(**kwargs)}
    verdicts = [v for k, v in result.items() if k.endswith("_verdict")]
    if "verdict" not in result and verdicts:
        result["verdict"] = overall(*verdicts)
    if "verdict" in result:
        result.setdefault("goal_met", result["verdict"] == PASS)
    return result


def _num(v) -> str:
    return f"{v:,.4g}" if isinstance(v, float) else str(v)


def format_result(result: dict) -> str:
    """The figures one a line; a judged figure with its interval and verdict beside it."""
    judged = {k[:-len("_verdict")] for k in result if k.endswith("_verdict")}
    rows = []
    for k, v in result.items():
        if k in ("benchmark", "goal") or any(k in (f"{j}_ci", f"{j}_ci_level", f"{j}_verdict")
                                             for j in judged):
            continue
        if k in judged:
            lo, hi = result[f"{k}_ci"]
            rows.append([k, f"{_num(v)}  [{_num(lo)}, {_num(hi)}] "
                            f"({result[f'{k}_ci_level']:.0%} interval)  {result[f'{k}_verdict']}"])
        elif isinstance(v, list | tuple):
            rows.append([k, f"[{', '.join(_num(x) for x in v)}]"])
        else:
            rows.append([k, _num(v)])
    figures = text_table({"figure": "<32", "value": "<"}, rows, header=False, sep=" ")
    return "\n".join([f"benchmark {result['benchmark']}  (goal: {result['goal']})"]
                     + ["  " + line for line in figures.splitlines()])


_UNITS = (("gb_s", "GB/s"), ("per_s", "per s"), ("_ms", "ms"), ("mib", "MiB"),
          ("fraction", "fraction"), ("_s", "s"))


def _leaves(value, key: str = ""):
    """(dotted key, value) of every number, bool and short string in a nested result."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, f"{key}.{k}" if key else str(k))
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield from _leaves(v, f"{key}.{i}")
    elif isinstance(value, bool | int | float | str) and value == value:  # NaN is not kept
        yield key, value


def record_result(result: dict, folder) -> Path:
    """A benchmark's figures as the checkpoint record ``bench_NAME`` in ``folder``."""
    ck = Checkpoint(f"bench_{result['benchmark']}", records_dir=folder)
    ck.constraint(result["goal"])
    for key, value in _leaves({k: v for k, v in result.items() if k not in ("benchmark", "goal")}):
        if isinstance(value, str) and len(value) > 200:
            value = value[:197] + "..."
        unit = "count" if key.endswith(".n") else next(  # .n: how many values a spread has
            (u for suffix, u in _UNITS if suffix in key.lower()), "")
        ck.observe(key, value, unit)
    return ck.write(print_summary=False)
