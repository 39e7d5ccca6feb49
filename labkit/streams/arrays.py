"""IterableDatasets over array shards: the duplicate-samples trap and its fixes (chapter 03).

An ``IterableDataset`` is copied into every DataLoader worker (and every rank runs its own
loader). Unless each copy picks its own part, every worker yields everything: N workers,
N copies of each sample. :class:`RowRange` shows the trap and the two classic fixes
(``get_worker_info`` in ``__iter__``; a ``worker_init_fn`` that narrows each copy);
:class:`ShardStream` is the scalable one: whole shards assigned per rank x worker.
Both yield ``(features, id)``, or with ``tag=True`` a dict that also says which
rank/worker delivered the sample (for :func:`deliveries` and ``lk.audit``).
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from ..data.datasets import open_array
from ..errors import DataFormatError
from .split import assign, current_split, split_range


def _tag(rank: int, world_size: int, worker: int) -> str:
    where = "main" if get_worker_info() is None else f"worker{worker}"
    return where if world_size == 1 else f"rank{rank}/{where}"


class RowRange(IterableDataset):
    """Rows ``start..end`` of one array file, yielded one by one.

    ``split`` picks how the copies in several workers (and ranks) share the rows:
    ``"none"``: each copy yields every row (the trap); ``"worker_info"``: ``__iter__`` asks
    ``get_worker_info()`` and takes its contiguous piece; ``"init_fn"``: the
    :func:`range_worker_init` ``worker_init_fn`` narrowed ``start``/``end`` of each
    worker's copy before iteration (the torch documentation's pattern).
    """

    def __init__(self, fixture_or_path, start: int = 0, end: int | None = None,
                 split: str = "worker_info", tag: bool = False, rank: int | None = None,
                 world_size: int | None = None):
        if split not in ("none", "worker_info", "init_fn"):
            raise ValueError(f"split={split!r}: 'none', 'worker_info' or 'init_fn'")
        path = fixture_or_path.file("array.npy") if hasattr(fixture_or_path, "file") \
            else fixture_or_path
        self.path = path
        rows = len(open_array(path))  # validate in the parent, naming the file
        self.start, self.end = start, rows if end is None else end
        self.split, self.tag, self.rank, self.world_size = split, tag, rank, world_size

    def __iter__(self):
        rank, world, worker, workers = current_split(self.rank, self.world_size)
        lo, hi = self.start, self.end
        if self.split == "worker_info":
            lo, hi = split_range(lo, hi, rank * workers + worker, world * workers)
        elif self.split == "init_fn" and world > 1:
            # workers are narrowed by the init fn; ranks (one process each) here
            lo, hi = split_range(lo, hi, rank, world)
        arr = open_array(self.path)
        tag = _tag(rank, world, worker) if self.tag else None
        for i in range(lo, hi):
            x = torch.from_numpy(np.array(arr[i]))
            yield {"x": x, "id": i, "source": tag} if self.tag else (x, i)


def range_worker_init(worker_id: int) -> None:
    """``worker_init_fn`` for :class:`RowRange` (``split="init_fn"``): narrow this copy.

    Runs once in each worker before it iterates; the dataset object it edits is the
    worker's own copy, so every worker ends up with a different ``start``/``end``.
    """
    info = get_worker_info()
    ds = info.dataset
    ds.start, ds.end = split_range(ds.start, ds.end, worker_id, info.num_workers)


class ShardStream(IterableDataset):
    """Samples of an ``array_shards`` fixture, whole shards assigned per rank x worker.

    Args:
        fixture: the ``array_shards`` fixture (or any with ``meta["shards"]``).
        split: ``"rank_worker"`` (each global worker takes shards ``g, g + total, ...``),
            ``"worker"`` (split over workers only: every rank reads everything) or
            ``"none"`` (every copy reads every shard: the trap).
        shards: use only these shard indices (e.g. fewer shards than workers).
        seed: ``None`` keeps file order; an int shuffles the shard order and the rows in
            each shard, the same way in every copy, different per :meth:`set_epoch`.
        tag: yield dicts with the delivering ``source`` for audits.
    """

    def __init__(self, fixture, split: str = "rank_worker", shards=None, seed: int | None = None,
                 tag: bool = False, rank: int | None = None, world_size: int | None = None):
        if split not in ("rank_worker", "worker", "none"):
            raise ValueError(f"split={split!r}: 'rank_worker', 'worker' or 'none'")
        meta = fixture.meta
        if "shards" not in meta:
            raise DataFormatError(f"fixture {fixture.name!r} has no shards")
        entries = meta["shards"] if shards is None else [meta["shards"][i] for i in shards]
        dtype = np.dtype(meta["dtype"]) if "dtype" in meta else None
        shape = tuple(meta["sample_shape"]) if "sample_shape" in meta else None
        self.shards = []
        for e in entries:
            path = fixture.path / e["file"]
            if not path.exists():
                raise DataFormatError(f"{path}: shard file missing ({fixture.name} lists it)")
            arr = open_array(path)  # validate size, dtype, shape now, in the parent
            if (dtype is not None and arr.dtype != dtype) or (
                    shape is not None and arr.shape[1:] != shape):
                raise DataFormatError(f"{path}: rows are {arr.dtype} {arr.shape[1:]}, expected "
                                      f"{dtype} {shape} like the other shards")
            if len(arr) != e["samples"]:
                raise DataFormatError(f"{path}: {len(arr)} rows, the manifest says "
                                      f"{e['samples']}")
            self.shards.append((str(path), int(e["first_id"]), int(e["samples"])))
        self.split, self.seed, self.tag = split, seed, tag
        self.rank, self.world_size, self.epoch = rank, world_size, 0

    def set_epoch(self, epoch: int) -> None:
        """A new shuffle per epoch (the same one in every copy); call before each epoch."""
        self.epoch = int(epoch)

    @property
    def samples(self) -> int:
        return sum(n for _, _, n in self.shards)

    def __len__(self) -> int:  # the whole dataset; a rank's share may differ
        return self.samples

    def _order(self):
        if self.seed is None:
            return list(range(len(self.shards))), None
        rng = np.random.default_rng([self.seed, self.epoch])
        return [int(i) for i in rng.permutation(len(self.shards))], rng

    def __iter__(self):
        rank, world, worker, workers = current_split(self.rank, self.world_size)
        order, _ = self._order()
        if self.split == "rank_worker":
            mine = [order[i] for i in assign(len(order), rank, world, worker, workers)]
        elif self.split == "worker":
            mine = [order[i] for i in assign(len(order), 0, 1, worker, workers)]
        else:
            mine = order
        tag = _tag(rank, world, worker) if self.tag else None
        for s in mine:
            path, first, n = self.shards[s]
            arr = open_array(path)
            rows = range(n) if self.seed is None else \
                np.random.default_rng([self.seed, self.epoch, s]).permutation(n)
            for r in rows:
                x = torch.from_numpy(np.array(arr[r]))
                i = first + int(r)
                yield {"x": x, "id": i, "source": tag} if self.tag else (x, i)


def deliveries(loader) -> list[tuple[str, list[int]]]:
    """One epoch of a loader over a ``tag=True`` dataset as ``(source, ids)`` pairs.

    Feed the result to ``lk.audit(pairs, expected)``. The iterator is shut down at the end,
    so no worker is left behind even if iteration fails.
    """
    from ..loading.loaders import shutdown

    out: dict[str, list[int]] = {}
    it = iter(loader)
    try:
        for batch in it:
            ids = batch["id"]
            ids = ids.tolist() if hasattr(ids, "tolist") else list(ids)
            srcs = batch["source"]
            if isinstance(ids, int):
                ids = [ids]
            if isinstance(srcs, str):  # one sample, or a batch the dataset made itself
                srcs = [srcs] * len(ids)
            for src, i in zip(srcs, ids, strict=True):
                out.setdefault(src, []).append(int(i))
    finally:
        shutdown(it)
    return sorted(out.items())
