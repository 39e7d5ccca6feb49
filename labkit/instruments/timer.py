"""The timers: best-of-N, and one clock for a loader that works ahead (ch. 01-07, 09-15; bench).

Every timed comparison in the kit goes through :func:`best_of` (a loader that works ahead,
through :func:`steady_rate`): a warm-up call that is not
timed, then ``repeats`` timed calls, each trial kept. On a shared machine noise only ever
adds time, so the fastest trial is the best estimate of the work's own cost (timeit's
reasoning); the trials stay available for a spread. On a GPU, ``sync="cuda"`` waits for
queued kernels before the clock starts and before it stops: without it the clock measures
how long the launches took to queue, not the work.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import LabkitError

# "wall" is what a learner waits; "cpu" is this process's own CPU time (user + system, all
# its threads), which a busy neighbour on a shared machine does not inflate.
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

    Introduced in chapter 10 (decode and augment). ``lk.best_of(fn).best_s`` is the figure:
    the fastest trial. The warm-up calls take imports, allocator growth, CUDA context and
    cold caches out of the figure.

    Args:
        fn: the work, a call with no arguments (wrap it: ``lambda: decode_all(blobs)``).
        repeats: timed trials (at least 1).
        warmup: untimed calls first.
        sync: None for CPU work; ``"cuda"`` (or ``"cuda:N"``) calls
            ``torch.cuda.synchronize`` before the clock starts and before it stops, so
            queued kernels count. Without CUDA it raises :class:`~labkit.LabkitError`.
        clock: ``"wall"`` (``time.perf_counter``) or ``"cpu"`` (this process's CPU time:
            steadier on a shared machine for single-process work, blind to worker processes
            and to time spent waiting).

    Returns:
        a :class:`Timing`: ``best_s``, ``median_s``, ``spread_pct``, ``trials_s``.
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


def steady_rate(loader, passes: int, prefetched: int = 0, count=len, sync=None) -> dict:
    """Samples/s of ``passes`` back-to-back passes over ``loader``, one clock for all of
    them, after one untimed warm-up pass (chapter 10b's DALI; review 10-F4).

    :func:`best_of`'s separate trials do not fit a loader that works ahead (DALI's prefetch
    queue): each trial would inherit the batches the one before had scheduled. Here
    ``prefetched`` samples were ready before the clock started and are taken off the count.
    ``count(batch)`` is a batch's samples; ``sync`` is :func:`best_of`'s.
    """
    wait = _cuda_sync(sync)
    for _ in loader:   # warm-up: the decoder's state, the first epoch's start-up
        pass
    if wait:
        wait()
    n = 0
    start = time.perf_counter()
    for _ in range(passes):
        for batch in loader:
            n += count(batch)
    if wait:
        wait()
    seconds = time.perf_counter() - start
    n = max(n - prefetched, 0)
    return {"images": n, "seconds": seconds, "samples_per_s": n / seconds}
