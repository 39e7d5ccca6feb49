"""A per-batch timeline: who made each batch, when, and how long the loop waited (chapter 13).

Every worker stamps each batch it makes (start, samples fetched, collated) and appends one
line to its own file; the training loop stamps its waits and steps. Both use
``time.perf_counter``, which on Linux is ``CLOCK_MONOTONIC``, one clock for the whole
machine, so stamps taken in forked or spawned workers line up with the loop's.

Only public torch API: the dataset is wrapped (``__getitems__`` sees a whole batch's
indices; an IterableDataset's ``__iter__`` marks where its first batch starts), the collate
function is wrapped, and ``get_worker_info()`` names the worker. A worker does not know the
batch's index in the epoch; torch hands map-style batches to workers in turn (batch ``b``
to worker ``b % num_workers``, the default ``in_order=True``), so the ``k``-th batch of
worker ``w`` is batch ``k * num_workers + w``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from itertools import islice

from torch.utils.data import DataLoader, IterableDataset, default_collate, get_worker_info

from ..instruments.measurement import wait_fraction
from ..instruments.meter import timed_steps
from .lanes import draw_lanes
from .rebuild import rebuild_loader

clock = time.perf_counter
# Per process (each worker has its own copy): when the batch being made started, and how
# many batches this process has finished. Set by the dataset wrapper, read by the collate one.
_state: dict = {"start": None, "fetched": None, "seq": 0}


def _worker() -> tuple[int, int]:
    info = get_worker_info()
    return (info.id, info.num_workers) if info is not None else (-1, 0)


class _TimedMap:
    """A map-style dataset whose whole-batch fetch is stamped."""

    def __init__(self, dataset):
        self.dataset = dataset

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, i):  # batch_size=None loaders fetch one sample at a time
        _state["start"] = clock()
        return self.dataset[i]

    def __getitems__(self, indices):
        _state["start"] = clock()
        inner = getattr(self.dataset, "__getitems__", None)
        return inner(indices) if inner is not None else [self.dataset[i] for i in indices]


class _TimedIterable(IterableDataset):
    """An IterableDataset whose first batch's start is stamped (later: the previous end)."""

    def __init__(self, dataset):
        self.dataset = dataset

    def __iter__(self):
        _state["start"] = clock()
        yield from self.dataset


class _TimedCollate:
    """Collate, then append ``worker pid seq start fetched end`` to this process's file."""

    def __init__(self, collate_fn, log_dir: str):
        self.collate_fn, self.log_dir = collate_fn, log_dir

    def __call__(self, samples):
        fetched = clock()
        out = self.collate_fn(samples)
        end = clock()
        start = _state["start"]
        if start is None:  # an iterable dataset's later batches: started when the last ended
            start = _state.get("end", fetched)
        wid, nw = _worker()
        line = f"{wid}\t{os.getpid()}\t{nw}\t{_state['seq']}\t{start!r}\t{fetched!r}\t{end!r}\n"
        # one write per batch with O_APPEND to this process's own file, kept open (a fork
        # inherits the parent's descriptor, so it is keyed by pid): never interleaved
        pid = os.getpid()
        if _state.get("fd", (None, None))[0] != (pid, self.log_dir):
            _state["fd"] = ((pid, self.log_dir), os.open(
                os.path.join(self.log_dir, f"{pid}.tsv"), os.O_WRONLY | os.O_CREAT | os.O_APPEND))
        os.write(_state["fd"][1], line.encode())
        _state.update(start=None, end=end, seq=_state["seq"] + 1)
        return out


def timed_loader(loader: DataLoader, log_dir: str, **knobs):
    """A copy of ``loader`` whose workers stamp every batch into ``log_dir`` (see the module)."""
    ds = loader.dataset
    timed = _TimedIterable(ds) if isinstance(ds, IterableDataset) else _TimedMap(ds)
    collate = _TimedCollate(loader.collate_fn or default_collate, log_dir)
    return rebuild_loader(loader, dataset=timed, collate_fn=collate, **knobs)


@dataclass
class Timeline:
    """What one pass looked like: per-batch worker spans and the loop's waits and steps.

    ``batches``: dicts with ``batch``, ``worker`` (-1: the main process), ``pid``,
    ``start``, ``fetched``, ``end`` (seconds since ``iter()``). ``loop``: dicts with
    ``batch``, ``asked`` (``next()`` called), ``got`` (batch in hand), ``done`` (step over).
    """

    name: str
    num_workers: int
    batches: list[dict] = field(default_factory=list)
    loop: list[dict] = field(default_factory=list)

    @property
    def wait_s(self) -> float:
        return sum(r["got"] - r["asked"] for r in self.loop[1:])

    @property
    def step_s(self) -> float:
        return sum(r["done"] - r["got"] for r in self.loop[1:])

    @property
    def wait_fraction(self) -> float:
        """Data-wait over loop time after the first batch (the meter's definition)."""
        if len(self.loop) < 2:
            return float("nan")
        return wait_fraction(self.wait_s, self.loop[-1]["done"] - self.loop[0]["done"])

    @property
    def first_batch_s(self) -> float:
        return self.loop[0]["got"] if self.loop else float("nan")

    def worker_busy(self) -> dict[int, float]:
        """Each worker's share of the pass spent making batches (fetch + collate)."""
        span = self.loop[-1]["done"] if self.loop else float("nan")
        busy: dict[int, float] = {}
        for b in self.batches:
            busy[b["worker"]] = busy.get(b["worker"], 0.0) + b["end"] - b["start"]
        return {w: s / span for w, s in sorted(busy.items())}

    def stage_s(self) -> dict[str, float]:
        """Median seconds per batch in each worker stage (fetch: samples; collate)."""
        import statistics

        if not self.batches:
            return {"fetch": float("nan"), "collate": float("nan")}
        return {"fetch": statistics.median(b["fetched"] - b["start"] for b in self.batches),
                "collate": statistics.median(b["end"] - b["fetched"] for b in self.batches)}

    def handover_s(self) -> float:
        """Median seconds from a batch being ready to the loop holding it: the hand-over.

        ``got - max(end, asked)``: a batch that ended before the loop asked for it sat in
        the queue until ``asked`` (queue time, not hand-over); one the loop was already
        waiting for crossed from ``end``. Batches the loop never took are left out.
        """
        import statistics

        ends = {b["batch"]: b["end"] for b in self.batches}
        gaps = [r["got"] - max(ends[r["batch"]], r["asked"]) for r in self.loop
                if r["batch"] in ends]
        return statistics.median(gaps) if gaps else float("nan")

    def plot(self, ax=None, title: str | None = None):
        """Lanes: one per worker (fetch, collate), and the loop (wait, step). Returns the figure."""
        return draw_lanes(self, ax=ax, title=title)


def record_timeline(loader: DataLoader, *, step=None, max_batches: int | None = None,
                    name: str | None = None, **knobs) -> Timeline:
    """Run one pass of a stamped copy of ``loader`` (with ``knobs`` applied) and collect it.

    ``step`` is called with every batch (a train step, or :func:`lk.simulated_step`).
    The copy's workers are stopped before returning.
    """
    log_dir = tempfile.mkdtemp(prefix="labkit-timeline-")
    _state.update(start=None, seq=0)  # num_workers=0 stamps in this process; fork copies it
    _state.pop("end", None)
    close_log()
    try:
        timed = timed_loader(loader, log_dir, **knobs)
        nw = timed.num_workers
        loop: list[dict] = []

        def on_batch(batch, asked, got, done):
            loop.append({"batch": len(loop), "asked": asked - t0, "got": got - t0,
                         "done": done - t0})

        t0 = clock()
        it = iter(timed)
        del timed  # the iterator is the last reference, persistent workers or not
        try:
            # the meter's timed loop; it lets go of the iterator when it returns
            timed_steps(it if max_batches is None else islice(it, max_batches), step, on_batch,
                        clock)
        finally:
            del it  # torch stops the workers now: every line they wrote is in its file
        return Timeline(name=name or f"num_workers={nw}", num_workers=nw,
                        batches=_read(log_dir, t0, len(loop)), loop=loop)
    finally:
        close_log()
        shutil.rmtree(log_dir, ignore_errors=True)


def close_log() -> None:
    """Close the timeline file this process holds open, if any.

    A stamped loader with ``num_workers=0`` (or a worker) keeps its file open between
    batches; :func:`record_timeline` closes it itself. Call this after iterating a
    :func:`timed_loader` yourself, before removing its ``log_dir``. A descriptor inherited
    through ``fork()`` is left to the process that opened it.
    """
    key, fd = _state.pop("fd", (None, None))
    if fd is not None and key[0] == os.getpid():
        os.close(fd)


def _read(log_dir: str, t0: float, n_batches: int) -> list[dict]:
    rows = []
    for fname in os.listdir(log_dir):
        with open(os.path.join(log_dir, fname)) as f:
            for line in f:
                wid, pid, nw, seq, start, fetched, end = line.split("\t")
                wid, nw, seq = int(wid), int(nw), int(seq)
                batch = seq * nw + wid if nw else seq
                rows.append({"batch": batch, "worker": wid, "pid": int(pid),
                             "start": float(start) - t0, "fetched": float(fetched) - t0,
                             "end": float(end) - t0})
    rows.sort(key=lambda r: r["batch"])
    # prefetched batches the loop never took are kept: they show the queue filling up
    return rows
