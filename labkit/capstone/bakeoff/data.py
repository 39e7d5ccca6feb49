"""The bake-off's data: one fixture's JPEGs written once into every format (chapter 16)."""

from __future__ import annotations

import shutil
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

from ...data.fixtures import source_folder
from ...data.writers import _tar_add, shard_bounds
from ...formats.hdf5rows import write_hdf5
from ...formats.lmdbrows import write_lmdb
from ...images.decode import file_bytes
from ...images.folder import read_labels
from ...objstore.leftovers import litdata_optimize
from .datasets import SAMPLE_HEAD

# -- the shared data, in every format -------------------------------------------------------


@dataclass
class BakeoffData:
    """The one fixture's samples and the formats written from them (see :func:`prepare_bakeoff`).

    ``rows`` are ``(id, label, file)``; ``jpegs`` their encoded bytes, read once (every
    format is written from them); ``formats`` maps a format name to its files or folder;
    ``conversion_s`` how long writing each format took (not part of any loader's throughput).
    """

    images: Path
    dest: Path
    rows: list
    shards: int
    row_group: int
    jpegs: list = field(default_factory=list)
    formats: dict = field(default_factory=dict)
    conversion_s: dict = field(default_factory=dict)

    @property
    def samples(self) -> int:
        return len(self.rows)

    def blobs(self):
        """``(id, label, jpeg bytes)`` for every sample, in order."""
        for (sample_id, label, _), jpg in zip(self.rows, self.jpegs, strict=True):
            yield sample_id, label, jpg


def _write_tar(data: BakeoffData) -> list[Path]:
    """WebDataset-style tar shards: ``{key}.jpg``, ``{key}.cls``, ``{key}.id`` per sample."""
    folder = data.dest / "tar"
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"shard-{s:05d}.tar" for s in range(data.shards)]
    bounds, blobs = shard_bounds(data.samples, data.shards), data.blobs()
    for s, path in enumerate(paths):  # contiguous runs, in order, cut as the Parquet shards
        with tarfile.open(path, "w") as tar:
            for sample_id, label, jpg in islice(blobs, bounds[s + 1] - bounds[s]):
                key = f"{sample_id:07d}"
                for ext, payload in (("jpg", jpg), ("cls", str(label).encode()),
                                     ("id", str(sample_id).encode())):
                    _tar_add(tar, f"{key}.{ext}", payload)
    return paths


def _write_parquet(data: BakeoffData) -> list[Path]:
    """Parquet shards with ``id``, ``label`` and ``jpg`` (binary) columns."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = data.dest / "parquet"
    folder.mkdir(parents=True, exist_ok=True)
    ids, labels, jpgs = [], [], []
    for sample_id, label, jpg in data.blobs():
        ids.append(sample_id)
        labels.append(label)
        jpgs.append(jpg)
    paths, bounds = [], shard_bounds(data.samples, data.shards)
    for s in range(data.shards):
        lo, hi = bounds[s], bounds[s + 1]
        table = pa.table({"id": pa.array(ids[lo:hi], pa.int64()),
                          "label": pa.array(labels[lo:hi], pa.int64()),
                          "jpg": pa.array(jpgs[lo:hi], pa.binary())})
        path = folder / f"shard-{s:05d}.parquet"
        pq.write_table(table, path, row_group_size=data.row_group)
        paths.append(path)
    return paths


def _write_mds(data: BakeoffData) -> Path:
    """MosaicML Streaming's MDS shards (``MDSWriter``)."""
    from streaming import MDSWriter

    folder = data.dest / "mds"
    with MDSWriter(out=str(folder), columns={"id": "int", "label": "int", "jpg": "bytes"},
                   size_limit=1 << 22) as out:
        for sample_id, label, jpg in data.blobs():
            out.write({"id": sample_id, "label": label, "jpg": jpg})
    return folder


def _litdata_item(item):
    # module level: litdata's optimize() pickles the function into its workers
    sample_id, label, jpg = item
    return {"id": sample_id, "label": label, "jpg": jpg}


def _write_litdata(data: BakeoffData) -> Path:
    """LitData's optimized chunks (``litdata.optimize``, through chapter 14's helper)."""
    return litdata_optimize(_litdata_item, list(data.blobs()), data.dest / "litdata",
                            chunk_bytes="4MB")


def _packed(data: BakeoffData) -> list[bytes]:
    """Each sample as one value: its id and label
    (:data:`~labkit.capstone.bakeoff.datasets.SAMPLE_HEAD`), then its JPEG bytes."""
    return [SAMPLE_HEAD.pack(sample_id, label) + jpg for sample_id, label, jpg in data.blobs()]


def _write_lmdb(data: BakeoffData) -> Path:
    """One LMDB environment of packed samples (chapter 12's writer, variable-length rows)."""
    write_lmdb(data.dest / "lmdb", _packed(data))
    return data.dest / "lmdb"


def _write_hdf5(data: BakeoffData) -> Path:
    """One HDF5 file of packed samples (chapter 12's writer, variable-length rows)."""
    write_hdf5(data.dest / "images.h5", _packed(data))
    return data.dest / "images.h5"


WRITERS: dict[str, Callable[[BakeoffData], object]] = {
    "tar": _write_tar, "parquet": _write_parquet, "mds": _write_mds, "litdata": _write_litdata,
    "lmdb": _write_lmdb, "hdf5": _write_hdf5}


def prepare_bakeoff(images, dest, *, samples: int | None = None, shards: int = 4,
                 row_group: int = 64, formats=("tar", "parquet")) -> BakeoffData:
    """Write the first ``samples`` images of ``images`` into each of ``formats`` under ``dest``.

    Each conversion is timed (``conversion_s``). More formats can be added later with
    :func:`ensure_format` (the adapters ask for theirs).
    """
    folder = source_folder(images)
    rows = read_labels(folder)
    if samples is not None:
        rows = rows[:samples]
    if shards < 1 or shards > len(rows):
        raise ValueError(f"shards={shards}: need 1..{len(rows)} (one sample per shard at least)")
    data = BakeoffData(folder, Path(dest), rows, int(shards), int(row_group),
                       jpegs=file_bytes(folder / rel for _, _, rel in rows))
    data.dest.mkdir(parents=True, exist_ok=True)
    for f in formats:
        ensure_format(data, f)
    return data


def ensure_format(data: BakeoffData, fmt: str):
    """The files of format ``fmt``, written (and timed) the first time they are asked for."""
    if fmt not in data.formats:
        if fmt not in WRITERS:
            raise ValueError(f"format={fmt!r}: choose one of {', '.join(WRITERS)}")
        t0 = time.perf_counter()
        data.formats[fmt] = WRITERS[fmt](data)
        data.conversion_s[fmt] = time.perf_counter() - t0
    return data.formats[fmt]



def cleanup_bakeoff(data: BakeoffData) -> None:
    """Remove the formats written for the bake-off (the fixture itself is never touched)."""
    shutil.rmtree(data.dest, ignore_errors=True)
