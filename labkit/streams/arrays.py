"""An IterableDataset over array shards, whole shards per rank x worker (chapters 03-05)."""

from __future__ import annotations

import numpy as np
import torch

from ..data.datasets import open_array
from ..errors import DataFormatError
from .split import SplitStream


class ShardStream(SplitStream):
    """``(features, id)`` of an ``array_shards`` fixture, whole shards per rank x worker
    (``split`` as :class:`SplitStream`'s); ``shards``: only these; ``seed``: shuffle shards
    and rows per epoch; ``tag``: dicts with the delivering ``source``, for audits."""

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
