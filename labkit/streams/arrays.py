"""IterableDatasets over array shards: the duplicate-samples trap and its fixes (chapters 03-05).

An ``IterableDataset`` is copied into every DataLoader worker (and every rank runs its own
loader). Unless each copy picks its own part, every worker yields everything: N workers,
N copies of each sample. :class:`RowRange` shows the trap and the two classic fixes
(``get_worker_info`` in ``__iter__``; a ``worker_init_fn`` that narrows each copy);
:class:`ShardStream` is the scalable one: whole shards assigned per rank x worker.
Both yield ``(features, id)``, or with ``tag=True`` a dict that also says which
rank/worker delivered the sample (for ``lk.deliveries`` and ``lk.audit``).
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import get_worker_info

from ..data.datasets import open_array
from ..data.writers import shard_bounds
from ..errors import DataFormatError
from .split import SplitStream


def _piece(lo: int, hi: int, part: int, parts: int) -> tuple[int, int]:
    """Contiguous piece ``part`` of ``parts`` of ``[lo, hi)``, cut by :func:`shard_bounds`."""
    bounds = shard_bounds(hi - lo, parts)
    return lo + bounds[part], lo + bounds[part + 1]


class RowRange(SplitStream):
    """Rows ``start..end`` of one array file, yielded one by one.

    ``split`` picks how the copies in several workers (and ranks) share the rows:
    ``"none"``: each copy yields every row (the trap); ``"worker_info"``: ``__iter__`` asks
    ``get_worker_info()`` and takes its contiguous piece; ``"init_fn"``: the
    :func:`range_worker_init` ``worker_init_fn`` narrowed ``start``/``end`` of each
    worker's copy before iteration (the torch documentation's pattern).
    """

    splits = ("none", "worker_info", "init_fn")

    def __init__(self, fixture_or_path, start: int = 0, end: int | None = None,
                 split: str = "worker_info", tag: bool = False, rank: int | None = None,
                 world_size: int | None = None):
        super().__init__(split=split, rank=rank, world_size=world_size)
        path = fixture_or_path.file("array.npy") if hasattr(fixture_or_path, "file") \
            else fixture_or_path
        self.path = path
        rows = len(open_array(path))  # validate in the parent, naming the file
        self.start, self.end = start, rows if end is None else end
        self.tag = tag

    def __iter__(self):
        place = self.place()
        lo, hi = self.start, self.end
        if self.split == "worker_info":
            lo, hi = _piece(lo, hi, place.slot, place.world_size * place.num_workers)
        elif self.split == "init_fn" and place.world_size > 1:
            # workers are narrowed by the init fn; ranks (one process each) here
            lo, hi = _piece(lo, hi, place.rank, place.world_size)
        arr = open_array(self.path)
        tag = place.source if self.tag else None
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
    ds.start, ds.end = _piece(ds.start, ds.end, worker_id, info.num_workers)


class ShardStream(SplitStream):
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
        super().__init__(split=split, seed=seed, rank=rank, world_size=world_size)
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
        self.tag = tag

    @property
    def samples(self) -> int:
        return sum(n for _, _, n in self.shards)

    def __len__(self) -> int:  # the whole dataset; a rank's share may differ
        return self.samples

    def __iter__(self):
        place = self.place()
        tag = place.source if self.tag else None
        for s in self.share(len(self.shards), place):
            path, first, n = self.shards[s]
            arr = open_array(path)
            rows = self.rng(s).permutation(n) if self.shuffled else range(n)
            for r in rows:
                x = torch.from_numpy(np.array(arr[r]))
                i = first + int(r)
                yield {"x": x, "id": i, "source": tag} if self.tag else (x, i)
