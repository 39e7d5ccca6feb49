"""The throughput meter: how fast a loader delivers, how long training waits (chapter 00 on).

Per pass (``t_end[i]``: when batch ``i``'s step finished, or when it arrived without a step):

* ``first_batch_s``: from ``iter(loader)`` to the first batch (worker start-up included).
* ``samples_per_s``: steady state, ``samples in batches 1..n-1 / (t_end[n-1] - t_end[0])``.
* ``wait_s`` / ``compute_s``: time blocked in ``next()`` / time in the step, batches 1..n-1.
* batch latency: each later batch's data-wait. Without a step, batches < 20 us apart are
  timed in groups of >= 200 us after the first 64 (``Pass.stride`` batches a group).
"""


from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import Any

import numpy as np
from torch.utils.data import BatchSampler, DataLoader, IterableDataset, default_collate

from ..loading.batch import batch_nbytes, batch_tensors, make_sizer
from .measurement import Measurement, Pass


def uniform_batch_size(loader: Any) -> int | None:
    """The batch size torch guarantees for every batch but the last (a DataLoader over a
    map-style dataset, stock BatchSampler, default collate), else None."""
    if (
        isinstance(loader, DataLoader)
        and type(loader.batch_sampler) is BatchSampler
        and loader.collate_fn is default_collate
        and not isinstance(loader.dataset, IterableDataset)
    ):
        return loader.batch_size
    return None


#: Batches faster than this are timed in groups (a clock read a batch would be 2 % of it) of at
#: least GROUP_PERIOD_S and at most MAX_STRIDE batches (a group's batches live until counted).
FAST_BATCH_S = 20e-6
GROUP_PERIOD_S = 200e-6
MAX_STRIDE = 256
_PROBE_BATCHES = 64


def _stride_for(recv: list[float]) -> int:
    """Batches per clock read: 1, or a power of two making a group last >= 200 us."""
    if len(recv) < 8:
        return 1
    period = float(np.median(np.diff(recv)))
    if period >= FAST_BATCH_S:
        return 1
    stride = 2
    while stride * period < GROUP_PERIOD_S and stride < MAX_STRIDE:
        stride *= 2
    return stride


def timed_steps(batches: Iterable, step: Callable[[Any], Any] | None,
                on_batch: Callable[[Any, float, float, float], Any],
                clock: Callable[[], float] = time.perf_counter) -> int:
    """The kit's one timed loop with a train step (the meter, the dashboard, the timeline).

    Calls ``on_batch(batch, asked, got, done)`` per batch (``done`` is ``got`` without a step);
    a truthy return stops the loop. Returns how many batches it took.
    """
    it = iter(batches)
    n = 0
    try:
        while True:
            asked = clock()
            try:
                batch = next(it)
            except StopIteration:
                return n
            got = done = clock()
            if step is not None:
                step(batch)
                done = clock()
            n += 1
            stop = on_batch(batch, asked, got, done)
            del batch
            if stop:
                return n
    finally:
        # a traceback keeps this frame: it must not keep the iterator (and its workers) too
        del it, batches


def _timed_loop(rest, recv, clock, step, ends, last, sizer):
    """The batches after the first: :func:`timed_steps` with a step, else one hot loop per
    mode, grouped by ``stride`` when batches come < ``FAST_BATCH_S`` apart. Returns
    ``(sizes of the batches after the first, last batch, batches seen, stride)``."""
    sizes: list[int] = []
    rec, size, end = recv.append, sizes.append, ends.append
    if step is not None:
        held = [last]

        def stamp(batch, asked, got, done):
            rec(got)
            end(done)
            if sizer is not None:
                size(sizer(batch))
            held[0] = batch  # sized after the loop when the batch size was declared

        n = timed_steps(rest, step, stamp, clock)
        return sizes, held.pop(), n, 1
    n = 0
    for last in islice(rest, _PROBE_BATCHES - 1):
        rec(clock())
        if sizer is not None:
            size(sizer(last))
        n += 1
    stride = _stride_for(recv)
    mask, k = stride - 1, 0
    if stride == 1 and sizer is None:
        for last in rest:  # noqa: B007 (the last batch is sized after the loop)
            rec(clock())
            k += 1
    elif stride == 1:
        for last in rest:
            rec(clock())
            size(sizer(last))
            k += 1
    elif sizer is None:
        # Grouped, in C: islice cuts a group, a deque takes it and its length counts it; one
        # Python iteration and clock read a group (enumerate's per-batch tuple cost ~2 %).
        hold = deque(maxlen=stride)
        while True:
            hold.clear()
            hold.extend(islice(rest, stride))
            t = clock()
            got = len(hold)
            if not got:
                break  # the loader ran dry exactly at a group boundary
            rec(t)
            k += got
            last = hold[-1]
            if got < stride:
                break
        hold.clear()
        return sizes, last, n + k, stride if k else 1
    else:
        for last in rest:
            k += 1
            size(sizer(last))
            if not k & mask:
                rec(clock())
    if k & mask:  # a partial last group: stamp when the loader ran dry
        rec(clock())
    if k == 0:
        stride = 1  # nothing came after the probe: nothing was grouped
    return sizes, last, n + k, stride


def _one_pass(
    loader: Iterable, step: Callable | None, max_batches: int | None, batch_size: int | None
) -> Pass:
    clock = time.perf_counter
    recv: list[float] = []
    ends: list[float] = []
    t_start = clock()
    it = iter(loader)
    try:
        try:
            first = next(it)
        except StopIteration:
            raise ValueError("the loader yielded no batch; nothing to measure") from None
        recv.append(clock())
        sizer = make_sizer(first)
        sizes_first = sizer(first)
        if step is not None:
            step(first)
            ends.append(clock())
        if batch_size is not None and sizes_first > batch_size:
            raise ValueError(
                f"batch_size={batch_size} was declared, but the first batch holds "
                f"{sizes_first} samples; pass the right batch_size or none")
        nbytes_per_sample = batch_nbytes(first) / max(sizes_first, 1)
        tensors = batch_tensors(first)
        rest = it if max_batches is None else islice(it, max(max_batches - 1, 0))
        last = first
        del first
        # Uniform batches (batch_size given): only the first and the last are sized.
        more, last, n_rest, stride = _timed_loop(
            rest, recv, clock, step, ends, last, sizer=None if batch_size is not None else sizer)
        if batch_size is not None:
            samples = sizes_first + (sizes_first * (n_rest - 1) + sizer(last) if n_rest else 0)
        else:
            samples = sizes_first + sum(more)
        del last
    finally:
        # the last reference: torch stops the iterator's workers (persistent ones outlive it)
        del it
    return stamped_pass(t_start, recv, ends if step is not None else None, samples=samples,
                        first_samples=sizes_first, nbytes_per_sample=nbytes_per_sample,
                        batches=1 + n_rest, stride=stride, tensors=tensors)


def stamped_pass(t_start: float, recv: list[float], ends: list[float] | None, *, samples: int,
                 first_samples: int, nbytes_per_sample: float, batches: int | None = None,
                 stride: int = 1, tensors: int = 0) -> Pass:
    """A :class:`Pass` from a loop's stamps (``recv``: arrivals, ``ends``: steps done or None),
    by the definitions in this module's docstring; no batch gives an empty pass."""
    if not recv:
        return Pass(batches=0, samples=0, nbytes=0, first_batch_s=float("nan"), epoch_s=0.0,
                    steady_s=0.0, steady_samples=0, wait=np.empty(0), compute=np.empty(0))
    r = np.asarray(recv)
    e = r if ends is None else np.asarray(ends)
    batches = len(r) if batches is None else batches
    wait = r[1:] - e[:-1]
    if stride > 1:  # grouped stamps: each batch of a group gets the group's mean latency
        head = min(_PROBE_BATCHES - 1, len(wait))
        grouped = batches - 1 - head  # batches stamped in groups (the last may be partial)
        sizes_g = np.full(len(wait) - head, stride)
        if grouped % stride:
            sizes_g[-1] = grouped % stride
        wait = np.concatenate([wait[:head], np.repeat(wait[head:] / sizes_g, sizes_g)])
    return Pass(
        batches=batches, samples=samples, nbytes=int(round(nbytes_per_sample * samples)),
        first_batch_s=float(r[0] - t_start), epoch_s=float(e[-1] - t_start),
        steady_s=float(e[-1] - e[0]), steady_samples=samples - first_samples,
        wait=wait, compute=(e - r) if ends is not None else np.empty(0), stride=stride,
        tensors=tensors,
    )


def measure(
    loader: Iterable | Callable[[], Iterable],
    *,
    step: Callable[[Any], Any] | None = None,
    repeats: int = 3,
    warmup: int = 1,
    max_batches: int | None = None,
    name: str | None = None,
    config: dict | None = None,
    batch_size: int | None | str = "auto",
) -> Measurement:
    """Measure a loader: ``warmup`` untimed passes, then ``repeats`` timed ones (medians).

    ``loader``: a re-iterable (a DataLoader) or a callable returning a fresh one per pass.
    ``step``: a train step per batch (or :func:`simulated_step`), for the data-wait split.
    ``batch_size``: ``"auto"`` sizes every batch unless torch guarantees uniform ones; an int
    declares them uniform (only the first and last are sized); ``None`` sizes every batch.
    Bytes are the first batch's per sample times the samples.
    """
    if repeats < 1:
        raise ValueError("repeats must be at least 1")
    make = loader if callable(loader) and not hasattr(loader, "__iter__") else None
    # isinstance, not iter(loader) is loader: iter() on a DataLoader would start workers
    if make is None and isinstance(loader, Iterator) and repeats + warmup > 1:
        raise TypeError(
            "measure() needs to iterate the loader more than once; pass a DataLoader or "
            "other re-iterable, or a function returning a fresh iterator (lambda: gen())"
        )
    m = Measurement(name=name or type(loader).__name__, config=dict(config or {}),
                    step=step_name(step))
    for i in range(warmup + repeats):
        src = make() if make else loader
        bs = uniform_batch_size(src) if batch_size == "auto" else batch_size
        p = _one_pass(src, step, max_batches, bs)
        if i >= warmup:
            m.passes.append(p)
    return m


def step_name(step) -> str | None:
    if step is None:
        return None
    return getattr(step, "label", None) or getattr(step, "__name__", type(step).__name__)


def simulated_step(ms: float, kind: str = "sleep") -> Callable[[Any], None]:
    """A stand-in train step of ``ms`` milliseconds per batch: ``"sleep"`` releases the GIL
    (a GPU step), ``"busy"`` spins for that much of this thread's CPU time, holding it."""
    seconds = ms / 1e3
    if kind == "sleep":
        def step(batch):
            time.sleep(seconds)
    elif kind == "busy":
        def step(batch):
            deadline = time.thread_time() + seconds
            while time.thread_time() < deadline:
                pass
    else:
        raise ValueError(f"kind must be 'sleep' or 'busy', not {kind!r}")
    step.label = f"{kind} {ms:g} ms"
    return step
