"""Paired trials, a median with its interval, a three-way verdict (the benchmarks, ch. 01-14).

Interleaved pairs (A B, B A, ...) cancel drift in the machine's load; the median of their
ratios gets the sign-test interval, which assumes nothing of the noise; the verdict is
``pass``/``fail`` when the whole interval meets/misses the goal, else ``inconclusive``.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from math import comb

from .timer import best_of

PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"


def paired_trials(a: Callable[[], object], b: Callable[[], object], pairs: int,
                  clock: str = "wall") -> list[tuple[float, float]]:
    """``pairs`` timed (a, b) trials, interleaved A B, B A, A B ...; seconds of each."""
    out = []
    for i in range(pairs):
        order = (a, b) if i % 2 == 0 else (b, a)
        t = {f: best_of(f, repeats=1, warmup=0, clock=clock).best_s for f in order}
        out.append((t[a], t[b]))
    return out


def median_interval(values, level: float = 0.95) -> tuple[float, float, float, float]:
    """``(median, lo, hi, achieved_level)``: the sign-test interval ``[v_(k), v_(n+1-k)]``
    with the largest ``k`` covering ``level`` (under 6 values: the full range)."""
    v = sorted(values)
    n = len(v)
    if n == 0:
        raise ValueError("no values")

    def coverage(k: int) -> float:
        return 1 - 2 * sum(comb(n, i) for i in range(k)) / 2 ** n

    k = 1
    while k + 1 <= (n + 1) // 2 and coverage(k + 1) >= level:
        k += 1
    return statistics.median(v), v[k - 1], v[n - k], coverage(k)


def verdict(lo: float, hi: float, goal: float, higher_is_better: bool = True) -> str:
    """``pass`` if all of ``[lo, hi]`` meets ``goal``, ``fail`` if none does, else inconclusive."""
    if higher_is_better:
        return PASS if lo >= goal else FAIL if hi < goal else INCONCLUSIVE
    return PASS if hi < goal else FAIL if lo >= goal else INCONCLUSIVE


def overall(*verdicts: str) -> str:
    """One verdict for several goals: any fail fails; else any inconclusive; else pass."""
    return FAIL if FAIL in verdicts else INCONCLUSIVE if INCONCLUSIVE in verdicts else PASS


def judge(name: str, values, goal: float, higher_is_better: bool = True,
          level: float = 0.95) -> dict:
    """The figure ``name`` (median of ``values``), its interval, level and verdict."""
    med, lo, hi, achieved = median_interval(values, level)
    return {name: med, f"{name}_ci": [lo, hi], f"{name}_ci_level": round(achieved, 4),
            f"{name}_verdict": verdict(lo, hi, goal, higher_is_better)}
