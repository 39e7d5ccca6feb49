"""The timer: best-of-N (ch. 01-07, 09-15; bench).

Noise on a shared machine only adds time, so the fastest trial estimates the work's own cost
(timeit's reasoning); ``sync="cuda"`` waits for queued kernels at both ends of the clock.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import LabkitError

# "wall" is what a learner waits; "cpu", this process's CPU time, a busy neighbour does not inflate
CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}


@dataclass(frozen=True)
class Timing:
    """What :func:`best_of` measured: every trial's seconds, in the order they ran."""

    trials_s: tuple[float, ...]

    @property
    def best_s(self) -> float:
        """The fastest trial (noise only adds time)."""
        return min(self.trials_s)

    @property
    def median_s(self) -> float:
        return statistics.median(self.trials_s)

    @property
    def spread_pct(self) -> float:
        """How much slower the slowest trial was than the fastest, in percent."""
        return 100 * (max(self.trials_s) / self.best_s - 1) if self.best_s > 0 else 0.0


def _cuda_sync(sync) -> Callable[[], None] | None:
    """A function that waits for the device named by ``sync``, or None for no sync."""
    if sync is None:
        return None
    if not str(sync).startswith("cuda"):
        raise ValueError(f"sync must be None or 'cuda' (or 'cuda:N'), not {sync!r}")
    import torch

    if not torch.cuda.is_available():
        raise LabkitError(f"best_of(sync={sync!r}) needs CUDA and torch sees no CUDA device "
                          "here; time CPU work with sync=None")
    device = None if str(sync) == "cuda" else torch.device(sync)
    return lambda: torch.cuda.synchronize(device)


def best_of(fn: Callable[[], object], repeats: int = 3, warmup: int = 1, sync=None,
            clock: str = "wall") -> Timing:
    """Call ``fn()`` ``warmup`` times untimed, then time ``repeats`` calls; keep every trial.

    ``sync``: None for CPU work, ``"cuda"``/``"cuda:N"`` to synchronise around each trial.
    ``clock``: ``"wall"`` or ``"cpu"`` (this process's CPU time: blind to workers and waits).
    Returns a :class:`Timing` (``best_s``, ``median_s``, ``spread_pct``, ``trials_s``).
    """
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, not {repeats}")
    if clock not in CLOCKS:
        raise ValueError(f"clock must be one of {sorted(CLOCKS)}, not {clock!r}")
    wait = _cuda_sync(sync)
    now = CLOCKS[clock]
    for _ in range(warmup):
        fn()
    trials = []
    for _ in range(repeats):
        if wait:
            wait()
        t0 = now()
        fn()
        if wait:
            wait()
        trials.append(now() - t0)
    return Timing(tuple(trials))
