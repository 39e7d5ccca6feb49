"""Who reads what: rank x worker splitting, one base for every stream (chapters 03-08).

The global worker ``g = rank * num_workers + worker`` of ``world_size * num_workers`` takes
items ``g, g + total, ...`` of the epoch's order (:func:`assign`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from torch.utils.data import IterableDataset, get_worker_info

from ..records.table import text_table


class Place(NamedTuple):
    """Where the calling code runs: ``(rank, world_size, worker, num_workers)``."""

    rank: int
    world_size: int
    worker: int
    num_workers: int

    @property
    def slot(self) -> int:  # the global worker
        return self.rank * self.num_workers + self.worker

    @property
    def source(self) -> str:
        """Who delivers, as audits print it: ``main``, ``worker1``, ``rank1/worker0``..."""
        where = "main" if get_worker_info() is None else f"worker{self.worker}"
        return where if self.world_size == 1 else f"rank{self.rank}/{where}"


def current_split(rank: int | None = None, world_size: int | None = None) -> Place:
    """``(rank, world_size, worker, num_workers)`` of the calling code: the ranks given, else
    ``torch.distributed``'s, else torchrun's ``RANK``/``WORLD_SIZE``, else one process."""
    if rank is None or world_size is None:
        import torch.distributed as dist

        r, w = 0, 1
        if dist.is_available() and dist.is_initialized():
            r, w = dist.get_rank(), dist.get_world_size()
        elif "WORLD_SIZE" in os.environ:
            r, w = int(os.environ.get("RANK", 0)), int(os.environ["WORLD_SIZE"])
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
    """The base of every stream split over rank x worker: ``__iter__`` reads its :meth:`share`.

    ``split``: ``"rank_worker"``, ``"worker"`` (every rank reads everything) or ``"none"``
    (every copy does: the trap).
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

    def set_epoch(self, epoch: int) -> None:  # a new order per epoch, the same in every copy
        self.epoch = int(epoch)

    def place(self) -> Place:  # where this copy runs now (in ``__iter__``: workers differ)
        return current_split(self.rank, self.world_size)

    def rng(self, *salt: int) -> np.random.Generator:
        """The epoch's generator, ``default_rng([seed, epoch, *salt])`` (``seed`` an int)."""
        return np.random.default_rng([self.seed, self.epoch, *salt])

    @property
    def shuffled(self) -> bool:  # a seed permutes the units
        return self.seed is not None

    def order(self, units: int) -> list[int]:
        """All ``units`` in this epoch's order: stored, or permuted by ``(seed, epoch)``."""
        if not self.shuffled:
            return list(range(units))
        return [int(i) for i in self.rng().permutation(units)]

    def share(self, units: int, place: Place | None = None) -> list[int]:
        """The units ``place`` (default: here) reads this epoch, in order."""
        order = self.order(units)
        if self.split == "none":
            return order
        p = self.place() if place is None else place
        rank, world = (p.rank, p.world_size) if self.split == "rank_worker" else (0, 1)
        return [order[i] for i in assign(units, rank, world, p.worker, p.num_workers)]


@dataclass(frozen=True)
class ShardPlan:
    """Which shards each rank/worker gets (see :func:`shard_plan`)."""

    shards: int
    world_size: int
    num_workers: int
    assignment: dict[str, tuple[int, ...]]
    unit: str = "shards"

    @property
    def idle(self) -> list[str]:  # the rank/worker pairs without a shard: started, then idle
        return [src for src, s in self.assignment.items() if not s]

    def table(self) -> str:
        return text_table({"source": "<", self.unit: "<"},
                          [[src, ", ".join(map(str, s)) if s else "(idle)"]
                           for src, s in self.assignment.items()]) + (
            f"\n{self.shards} {self.unit} over {self.world_size} rank(s) x "
            f"{self.num_workers} worker(s): {len(self.idle)} idle")

    __str__ = table


def shard_plan(shards: int, num_workers: int, world_size: int = 1,
               unit: str = "shards") -> ShardPlan:
    """The shard assignment of every rank x worker, idle ones included (chapter 03);
    ``unit`` names what is assigned, ``num_workers=0`` is one worker (the loop itself)."""
    nw = max(1, num_workers)
    plan = {}
    for rank in range(world_size):
        for worker in range(nw):
            src = f"worker{worker}" if world_size == 1 else f"rank{rank}/worker{worker}"
            plan[src] = tuple(assign(shards, rank, world_size, worker, nw))
    return ShardPlan(shards, world_size, num_workers, plan, unit)
