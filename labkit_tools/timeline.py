"""``labkit diagnose --timeline``: who made each batch, when, how long the loop waited (13b).

Each worker stamps every batch it makes (start, fetched, collated) into a file of its own,
the loop its waits and steps, on ``time.perf_counter`` (one monotonic clock for the machine).
Torch hands batches out in turn: worker ``w``'s ``k``-th batch is ``k * num_workers + w``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from itertools import islice

from torch.utils.data import DataLoader, IterableDataset, default_collate, get_worker_info

from labkit.display.figures import agg_figure
from labkit.instruments.measurement import wait_fraction
from labkit.instruments.meter import timed_steps
from labkit.loading.loaders import WORKER_TIMEOUT_S

clock = time.perf_counter
# Per process (each worker has its own copy): when the batch being made started, and how
# many batches this process has finished. Set by the dataset wrapper, read by the collate one.
_state: dict = {"start": None, "fetched": None, "seq": 0}


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
        info, pid = get_worker_info(), os.getpid()
        wid, nw = (info.id, info.num_workers) if info is not None else (-1, 0)
        line = f"{wid}\t{pid}\t{nw}\t{_state['seq']}\t{start!r}\t{fetched!r}\t{end!r}\n"
        # one write per batch with O_APPEND to this process's own file, kept open (a fork
        # inherits the parent's descriptor, so it is keyed by pid): never interleaved
        if _state.get("fd", (None, None))[0] != (pid, self.log_dir):
            _state["fd"] = ((pid, self.log_dir), os.open(
                os.path.join(self.log_dir, f"{pid}.tsv"), os.O_WRONLY | os.O_CREAT | os.O_APPEND))
        os.write(_state["fd"][1], line.encode())
        _state.update(start=None, end=end, seq=_state["seq"] + 1)
        return out


def same_batches(loader: DataLoader, dataset, **kw) -> DataLoader:
    """A DataLoader over ``dataset`` (``loader``'s or a wrapper) cutting ``loader``'s batches."""
    if isinstance(loader.dataset, IterableDataset):
        return DataLoader(dataset, batch_size=loader.batch_size, drop_last=loader.drop_last, **kw)
    if loader.batch_sampler is not None:  # batch_size= built one; or the learner passed it
        return DataLoader(dataset, batch_sampler=loader.batch_sampler, **kw)
    return DataLoader(dataset, batch_size=None, sampler=loader.sampler, **kw)


def timed_loader(loader: DataLoader, log_dir: str, **knobs):
    """A copy of ``loader`` (the same batches, collate, start method) whose workers stamp every
    batch into ``log_dir``; ``knobs``: ``num_workers``, ``persistent_workers``."""
    ds = loader.dataset
    timed = _TimedIterable(ds) if isinstance(ds, IterableDataset) else _TimedMap(ds)
    nw = knobs.get("num_workers", loader.num_workers)
    kw = dict(num_workers=nw, collate_fn=_TimedCollate(loader.collate_fn or default_collate,
                                                       log_dir),
              pin_memory=loader.pin_memory, worker_init_fn=loader.worker_init_fn,
              generator=loader.generator, in_order=loader.in_order)
    if nw > 0:  # torch: these only with workers
        kw.update(timeout=max(loader.timeout, WORKER_TIMEOUT_S),
                  multiprocessing_context=loader.multiprocessing_context,
                  prefetch_factor=loader.prefetch_factor or 2,
                  persistent_workers=knobs.get("persistent_workers", loader.persistent_workers))
    return same_batches(loader, timed, **kw)


#: The lanes' colours: a worker fetching samples, collating them; the loop waiting, stepping.
COLORS = {"fetch": "#4C72B0", "collate": "#DD8452", "wait": "#C44E52", "step": "#55A868"}


@dataclass
class Timeline:
    """One pass: ``batches`` (``batch``, ``worker`` (-1: the main process), ``pid``, ``start``,
    ``fetched``, ``end``: seconds since ``iter()``) and ``loop`` (``batch``, ``asked``: next()
    called, ``got``: batch in hand, ``done``: step over)."""

    name: str
    num_workers: int
    batches: list[dict] = field(default_factory=list)
    loop: list[dict] = field(default_factory=list)

    @property
    def wait_fraction(self) -> float:
        """Data-wait over loop time after the first batch (the meter's definition)."""
        if len(self.loop) < 2:
            return float("nan")
        wait = sum(r["got"] - r["asked"] for r in self.loop[1:])
        return wait_fraction(wait, self.loop[-1]["done"] - self.loop[0]["done"])

    def plot(self, title: str | None = None):
        """A lane per worker (fetch, collate) and the loop's (wait, step); no pyplot. Gaps in a
        worker lane: its queue is full (the step is the bound); a red loop: the loader is."""
        from matplotlib.patches import Patch

        workers = sorted({b["worker"] for b in self.batches})
        fig = agg_figure(figsize=(10, 1.2 + 0.45 * (len(workers) + 1)))
        ax = fig.add_subplot()
        lane = {w: i + 1 for i, w in enumerate(workers)}
        for b in self.batches:
            y = (lane[b["worker"]] - 0.4, 0.8)
            ax.broken_barh([(b["start"], b["fetched"] - b["start"])], y, color=COLORS["fetch"])
            ax.broken_barh([(b["fetched"], b["end"] - b["fetched"])], y, color=COLORS["collate"])
            if len(self.batches) <= 40:
                ax.text((b["start"] + b["end"]) / 2, lane[b["worker"]], str(b["batch"]),
                        ha="center", va="center", fontsize=7, color="white")
        for r in self.loop:
            ax.broken_barh([(r["asked"], r["got"] - r["asked"])], (-0.4, 0.8), color=COLORS["wait"])
            ax.broken_barh([(r["got"], r["done"] - r["got"])], (-0.4, 0.8), color=COLORS["step"])
        ax.set_yticks(range(len(workers) + 1), ["loop"] + [
            "main process" if w < 0 else f"worker {w}" for w in workers])
        ax.set_xlabel("seconds since iter(loader)")  # the blank start: workers starting
        ax.set_xlim(left=0)
        ax.set_title(title or f"{self.name}: waiting {self.wait_fraction:.0%} of the loop")
        ax.legend(handles=[Patch(color=c, label=k) for k, c in COLORS.items()],
                  loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
        fig.tight_layout()
        return fig


def record_timeline(loader: DataLoader, *, step=None, max_batches: int | None = None,
                    name: str | None = None, **knobs) -> Timeline:
    """One pass of a stamped copy of ``loader`` (``knobs``: as :func:`timed_loader`'s)."""
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
                        batches=_read(log_dir, t0), loop=loop)
    finally:
        close_log()
        shutil.rmtree(log_dir, ignore_errors=True)


def close_log() -> None:
    """Close the timeline file this process holds open (one inherited by ``fork()`` stays)."""
    key, fd = _state.pop("fd", (None, None))
    if fd is not None and key[0] == os.getpid():
        os.close(fd)


def _read(log_dir: str, t0: float) -> list[dict]:
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
    # prefetched batches the loop never took are kept: they show the queue filling up
    return sorted(rows, key=lambda r: r["batch"])
