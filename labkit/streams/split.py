"""Who reads what: splitting shards (or rows) across ranks x workers, and the idle ones.

Every rank runs its own DataLoader, every DataLoader its own workers; an IterableDataset
is copied into each of them and must itself pick its part. The rule used throughout the
kit: the *global worker* ``g = rank * num_workers + worker`` of ``world_size * num_workers``
takes items ``g, g + total, g + 2 * total, ...``. Introduced in chapter 03 (workers) and
chapter 04 (ranks).
"""

from __future__ import annotations

import os
from dataclasses import dataclass


def current_split(rank: int | None = None,
                  world_size: int | None = None) -> tuple[int, int, int, int]:
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
    return rank, world_size, worker, num_workers


def assign(items: int, rank: int, world_size: int, worker: int, num_workers: int) -> range:
    """The item indices (shards, row groups) one global worker reads: a strided range."""
    g = rank * num_workers + worker
    return range(g, items, world_size * num_workers)


def split_range(lo: int, hi: int, part: int, parts: int) -> tuple[int, int]:
    """Contiguous piece ``part`` of ``parts`` of ``[lo, hi)`` (sizes differ by at most 1)."""
    n = hi - lo
    base, extra = divmod(n, parts)
    start = lo + part * base + min(part, extra)
    return start, start + base + (1 if part < extra else 0)


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
        width = max(len(s) for s in self.assignment)
        lines = [f"{'source':<{width}}  {self.unit}"]
        for src, s in self.assignment.items():
            lines.append(f"{src:<{width}}  {', '.join(map(str, s)) if s else '(idle)'}")
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
