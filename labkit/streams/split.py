"""Who reads what: rank x worker splitting, one base for every stream (chapters 03-08).

Every rank runs its own DataLoader, every DataLoader its own workers; an IterableDataset
is copied into each of them and must itself pick its part. The rule used throughout the
kit: the *global worker* ``g = rank * num_workers + worker`` of ``world_size * num_workers``
takes items ``g, g + total, g + 2 * total, ...``. Introduced in chapter 03 (workers) and
chapter 04 (ranks). :class:`SplitStream` is that rule, the per-epoch seeded order and
``set_epoch`` written once; every stream in the kit derives from it. :class:`ResumableStream`
adds the one shuffle buffer (:mod:`labkit.streams.buffer`) and the one resume state of the
streams that resume (tar shards, chapter 08; shards in a bucket, chapter 14).
:func:`~labkit.data.writers.shard_bounds` (the fixtures' cut) is the one way the kit cuts
``n`` items into contiguous pieces.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from torch.utils.data import IterableDataset

from ..records.table import text_table
from .buffer import shuffle_buffer


class Place(NamedTuple):
    """Where the calling code runs: ``(rank, world_size, worker, num_workers)``."""

    rank: int
    world_size: int
    worker: int
    num_workers: int

    @property
    def slot(self) -> int:
        """The global worker ``rank * num_workers + worker``."""
        return self.rank * self.num_workers + self.worker

    @property
    def source(self) -> str:
        """Who delivers, as audits print it: ``main``, ``worker1``, ``rank1/worker0``..."""
        from torch.utils.data import get_worker_info

        where = "main" if get_worker_info() is None else f"worker{self.worker}"
        return where if self.world_size == 1 else f"rank{self.rank}/{where}"


def current_split(rank: int | None = None, world_size: int | None = None) -> Place:
    """``(rank, world_size, worker, num_workers)`` of the calling code.

    ``rank``/``world_size`` given explicitly win; else an initialised ``torch.distributed``;
    else the ``RANK``/``WORLD_SIZE`` variables torchrun sets; else a single process.
    The worker comes from ``torch.utils.data.get_worker_info()`` (0 of 1 outside workers).
    """
    from torch.utils.data import get_worker_info

    if rank is None or world_size is None:
        r, w = 0, 1
        try:
            import torch.distributed as dist

            if dist.is_available() and dist.is_initialized():
                r, w = dist.get_rank(), dist.get_world_size()
            elif "WORLD_SIZE" in os.environ:
                r, w = int(os.environ.get("RANK", 0)), int(os.environ["WORLD_SIZE"])
        except ImportError:  # pragma: no cover
            pass
        rank = r if rank is None else rank
        world_size = w if world_size is None else world_size
    info = get_worker_info()
    worker, num_workers = (0, 1) if info is None else (info.id, info.num_workers)
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is outside world_size {world_size}")
    return Place(rank, world_size, worker, num_workers)


def assign(items: int, rank: int, world_size: int, worker: int, num_workers: int) -> range:
    """The item indices (shards, row groups) one global worker reads: a strided range."""
    g = rank * num_workers + worker
    return range(g, items, world_size * num_workers)


class SplitStream(IterableDataset):
    """The base of every stream split over rank x worker (chapters 03-08).

    A subclass has ``units`` (shards, row groups) and asks, inside ``__iter__``:
    :meth:`place` (where it runs), :meth:`share` (its units, in this epoch's order) and
    :meth:`rng` (the epoch's random numbers). The order of an epoch is a pure function of
    ``(seed, epoch)``, the same in every copy, so the copies' shares never overlap.

    Args:
        split: one of the class's ``splits``: ``"rank_worker"`` (global worker ``g`` takes
            units ``g, g + total, ...``), ``"worker"`` (workers only: every rank reads
            everything) or ``"none"`` (every copy reads every unit: the trap).
        seed: ``None`` keeps the stored order; an int shuffles it, anew per :meth:`set_epoch`.
        rank, world_size: this process's place among ranks (default: :func:`current_split`).
    """

    splits: tuple[str, ...] = ("rank_worker", "worker", "none")

    def __init__(self, *, split: str = "rank_worker", seed: int | None = None,
                 rank: int | None = None, world_size: int | None = None):
        if split not in self.splits:
            *head, last = [repr(s) for s in self.splits]
            raise ValueError(f"split={split!r}: {', '.join(head)} or {last}")
        current_split(rank, world_size)  # fails now, not in a worker, on a bad rank
        self.split, self.seed, self.rank, self.world_size = split, seed, rank, world_size
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """A new shuffle per epoch (the same one in every copy); call before each epoch."""
        self.epoch = int(epoch)

    def place(self) -> Place:
        """Where this copy runs now (call it in ``__iter__``: workers differ)."""
        return current_split(self.rank, self.world_size)

    def rng(self, *salt: int) -> np.random.Generator:
        """The epoch's generator, ``default_rng([seed, epoch, *salt])`` (``seed`` an int)."""
        return np.random.default_rng([self.seed, self.epoch, *salt])

    @property
    def shuffled(self) -> bool:
        """Whether :meth:`order` permutes the units (a seed was given)."""
        return self.seed is not None

    def order(self, units: int) -> list[int]:
        """All ``units`` in this epoch's order: stored, or permuted by ``(seed, epoch)``."""
        if not self.shuffled:
            return list(range(units))
        return [int(i) for i in self.rng().permutation(units)]

    def share(self, units: int, place: Place | None = None) -> list[int]:
        """The units ``place`` (default: here) reads this epoch, in order."""
        order = self.order(units)
        p = self.place() if place is None else place
        if self.split == "rank_worker":
            return [order[i] for i in assign(units, p.rank, p.world_size, p.worker,
                                             p.num_workers)]
        if self.split == "worker":
            return [order[i] for i in assign(units, 0, 1, p.worker, p.num_workers)]
        return order


class ResumableStream(SplitStream):
    """A :class:`SplitStream` with a shuffle buffer and exact resume (chapters 08, 14).

    The state is small and replayable (STYLE 15): ``(seed, epoch)`` fix the order, so a
    checkpoint needs only how many samples this copy has yielded, plus a fingerprint
    (:meth:`fingerprint`: the shard count, the buffer size) that refuses a changed stream.
    A subclass's ``__iter__`` starts with ``skip = self.resume_point()``, drops the first
    ``skip`` samples of its epoch order (without reading them where it can), and passes what
    it yields through :meth:`counted`. ``state_dict`` / ``load_state_dict`` follow
    torchdata's ``Stateful`` protocol, so ``StatefulDataLoader`` checkpoints it per worker.
    """

    def __init__(self, *, buffer_size: int = 0, **kw):
        super().__init__(**kw)
        self.buffer_size = buffer_size
        self._yielded = 0        # samples this process's current iterator has yielded
        self._skip = 0           # samples to skip at the next __iter__ (set by a resume)

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch: a new shard and buffer permutation, the same for the same seed.

        A new epoch starts from its beginning (a resume's skip count belongs to the epoch
        it was saved in); setting the same epoch again keeps a pending resume.
        """
        if int(epoch) != self.epoch:
            self._yielded = self._skip = 0
        super().set_epoch(epoch)

    def buffered(self, items, place: Place):
        """``items`` through the shuffle buffer, seeded by ``(seed, epoch, slot)``."""
        if self.buffer_size <= 1:
            return iter(items)  # no buffer, no generator (``seed`` may be None)
        return shuffle_buffer(items, self.buffer_size, self.rng(place.slot, 1))

    def fingerprint(self) -> dict:
        """What must match for a state to apply: the subclass adds its shard count."""
        return {"seed": self.seed, "buffer_size": self.buffer_size}

    def resume_point(self) -> int:
        """Samples of this epoch's order to skip now (a pending resume's), once."""
        skip, self._skip = self._skip, 0
        self._yielded = skip
        return skip

    def counted(self, samples):
        """Yield ``samples``, counting them for :meth:`state_dict`."""
        for sample in samples:
            self._yielded += 1
            yield sample

    def state_dict(self) -> dict:
        """Where this process's iterator stands: enough to continue exactly there.

        ``samples_yielded`` is torchdata's word for the count (its batch sampler's key), and
        Chapter 11c's typed loader keeps the same fields, with ``seed`` and ``epoch``.
        """
        return {"epoch": self.epoch, "samples_yielded": self._yielded, **self.fingerprint()}

    def load_state_dict(self, state: dict) -> None:
        """Continue from :meth:`state_dict` at the next ``iter()`` (same shards and knobs)."""
        mine = self.fingerprint()
        theirs = {k: state.get(k) for k in mine}
        if theirs != mine:
            raise ValueError(f"state is for a different stream: {theirs}, this one is {mine}")
        self.epoch, self._skip = int(state["epoch"]), int(state["samples_yielded"])
        self._yielded = self._skip  # state_dict() before the next iter() says the same


@dataclass(frozen=True)
class ShardPlan:
    """Which shards each rank/worker gets (see :func:`shard_plan`)."""

    shards: int
    world_size: int
    num_workers: int
    assignment: dict[str, tuple[int, ...]]
    unit: str = "shards"

    @property
    def idle(self) -> list[str]:
        """The rank/worker pairs that get no shard at all: started, then idle."""
        return [src for src, s in self.assignment.items() if not s]

    def table(self) -> str:
        lines = [text_table({"source": "<", self.unit: "<"},
                            [[src, ", ".join(map(str, s)) if s else "(idle)"]
                             for src, s in self.assignment.items()])]
        lines.append(f"{self.shards} {self.unit} over {self.world_size} rank(s) x "
                     f"{self.num_workers} worker(s): {len(self.idle)} idle")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def shard_plan(shards: int, num_workers: int, world_size: int = 1,
               unit: str = "shards") -> ShardPlan:
    """The shard assignment of every rank x worker, idle ones included (chapter 03).

    ``unit`` names what is assigned in the table (``"row groups"`` in chapter 05).
    ``num_workers=0`` means the loading process itself is the only worker of its rank.
    """
    nw = max(1, num_workers)
    plan = {}
    for rank in range(world_size):
        for worker in range(nw):
            src = f"worker{worker}" if world_size == 1 else f"rank{rank}/worker{worker}"
            plan[src] = tuple(assign(shards, rank, world_size, worker, nw))
    return ShardPlan(shards, world_size, num_workers, plan, unit)
