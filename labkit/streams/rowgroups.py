"""Parquet row groups as the unit of work, split across ranks x workers (chapter 05).

A Parquet file is a sequence of row groups, each a column chunk per column: the smallest
piece a reader can fetch on its own, and the natural unit to hand to a worker. With few
files and many workers, splitting by row group keeps everyone busy where splitting by file
would not (chapter 03's idle workers). Introduced in chapter 05.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ..data.fixtures import source_files
from ..errors import DataFormatError
from .split import SplitStream


def _files(fixture_or_files) -> list[Path]:
    if hasattr(fixture_or_files, "meta") and "shards" in fixture_or_files.meta:
        return [fixture_or_files.path / s["file"] for s in fixture_or_files.meta["shards"]]
    return source_files(fixture_or_files, ".parquet", missing_ok=True)


def open_parquet(path, columns=()):
    """``pyarrow.parquet.ParquetFile`` for ``path``, checked: exists, readable, has columns.

    Every failure is a :class:`DataFormatError` naming the file and what was expected.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.is_file():
        raise DataFormatError(f"{path}: Parquet shard missing")
    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowInvalid, OSError) as e:
        raise DataFormatError(f"{path}: not a readable Parquet file ({e})") from None
    have = pf.schema_arrow.names
    missing = [c for c in columns if c not in have]
    if missing:
        raise DataFormatError(f"{path}: no column(s) {missing}; expected {list(columns)}, "
                              f"the file has {have}")
    return pf


class ParquetRowGroups(SplitStream):
    """Batches of Parquet rows, row groups assigned per rank x worker.

    Yields ready-made batches (use ``DataLoader(batch_size=None)``): ``(features, id)``
    tensors, or with ``tag=True`` a dict with ``x``, ``id``, ``label`` and ``source``.

    Args:
        fixture_or_files: the ``parquet`` fixture, a folder, or a list of files.
        batch_size: rows per yielded batch (a row group is cut into batches).
        columns: the columns read (projection); ``features`` and ``id`` are required.
        split: ``"rank_worker"`` or ``"none"`` (every copy reads everything).
        seed: ``None`` keeps file order; an int shuffles row groups (per :meth:`set_epoch`).
    """

    splits = ("rank_worker", "none")

    def __init__(self, fixture_or_files, batch_size: int = 256,
                 columns=("id", "features", "label"), split: str = "rank_worker",
                 seed: int | None = None, tag: bool = False, rank: int | None = None,
                 world_size: int | None = None):
        super().__init__(split=split, seed=seed, rank=rank, world_size=world_size)
        self.columns = list(dict.fromkeys(["id", "features", *columns]))
        self.files = [str(p) for p in _files(fixture_or_files)]
        if not self.files:
            raise DataFormatError(f"{fixture_or_files}: no Parquet files")
        self.units = []  # (file index, row group index, rows)
        for f, path in enumerate(self.files):
            meta = open_parquet(path, self.columns).metadata
            self.units += [(f, g, meta.row_group(g).num_rows) for g in range(meta.num_row_groups)]
        self.batch_size, self.tag = int(batch_size), tag

    @property
    def samples(self) -> int:
        return sum(n for _, _, n in self.units)

    def __iter__(self):
        place = self.place()
        tag = place.source
        opened: dict[int, object] = {}
        for u in self.share(len(self.units), place):
            f, g, _ = self.units[u]
            if f not in opened:
                opened[f] = open_parquet(self.files[f], self.columns)
            table = _read_row_group(opened[f], self.files[f], g, self.columns)
            feats = table.column("features").combine_chunks()
            width = feats.type.list_size
            # values of a fixed-size list: one flat buffer, viewed without a copy
            x = feats.values.to_numpy(zero_copy_only=True).reshape(-1, width)
            ids = table.column("id").to_numpy()
            labels = table.column("label").to_numpy() if "label" in self.columns else None
            for lo in range(0, len(ids), self.batch_size):
                hi = lo + self.batch_size
                xb = torch.from_numpy(np.array(x[lo:hi]))  # one copy: a writable batch
                ib = torch.from_numpy(np.array(ids[lo:hi]))
                if self.tag:
                    out = {"x": xb, "id": ib, "source": tag}
                    if labels is not None:
                        out["label"] = torch.from_numpy(labels[lo:hi].astype(np.int64))
                    yield out
                else:
                    yield xb, ib


def _read_row_group(pf, path, g: int, columns):
    """One row group; a damaged one fails naming the file and the row group, not bare."""
    import pyarrow as pa

    try:
        return pf.read_row_group(g, columns=columns)
    except (pa.ArrowException, OSError) as e:  # e.g. "Corrupt snappy compressed data."
        raise DataFormatError(
            f"{path}: row group {g} of {pf.metadata.num_row_groups} cannot be read ({e}); the "
            "file is damaged (its footer is intact, so it opened)") from None
