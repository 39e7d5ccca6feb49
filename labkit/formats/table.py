"""One set of rows written in every format, and one table row per format (chapter 12).

:func:`write_formats` writes the same rows as a file per sample, one ``.npy``, LMDB, HDF5
(contiguous, chunked, chunked + gzip), TFRecord with its index and ``torch.save`` per sample;
:func:`measure_formats` times each reader through the chapter's own loaders (random access
with 0 and N workers, sequential) and :func:`format_formats` prints the table. The last
columns are facts, with reasons.
"""

from __future__ import annotations

import hashlib
import pickle
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from torch.utils.data import DataLoader

from ..data.datasets import MemmapRows, NpyFilesDataset
from ..data.fixtures import source_files
from ..instruments.measurement import Measurement
from ..instruments.meter import measure
from ..loading.loaders import WORKER_TIMEOUT_S
from ..optional import status
from ..records.table import text_table
from .hdf5rows import Hdf5Rows, write_hdf5
from .lmdbrows import LmdbRows, write_lmdb
from .moreformats import (
    ArrayRecordRows,
    LanceRows,
    write_array_record,
    write_lance,
)
from .onetensor import (
    SafetensorsRows,
    TorchMmapRows,
    write_safetensors,
    write_torch_tensor,
)
from .tensorfiles import TensorFiles, write_tensor_files
from .tfrecords import TFRecordRows, index_path, write_tfrecord
from .trap import trap_trial

_ONE_GET = "poor: one request per sample (latency x samples)"
#: Facts per format family: (resume support, object-store friendly), each with its reason.
FACTS = {
    "files": ("yes: map-style, resume = sampler position", _ONE_GET),
    "npy": ("yes: map-style", "yes: a row is a byte range (ranged GETs)"),
    "lmdb": ("yes: map-style", "no: needs a local memory-mappable file; copy it down first"),
    "hdf5": ("yes: map-style", "partly: ranged reads per chunk (ros3, fsspec); metadata "
                               "lookups cost round trips"),
    "tfrecord": ("yes with the index (record k = offset k); without it, re-read from the start",
                 "yes: big sequential shards stream well"),
    "torch.save": ("yes: map-style", _ONE_GET),
}


@dataclass
class StoredFormat:
    """One format written to disk: what, where, how long it took, how to read it."""

    name: str
    family: str
    path: Path
    write_s: float
    make: Callable = field(repr=False)  # () -> a fresh map-style dataset
    #: False where the library says it must not be used across fork() (Lance warns so at
    #: every fork, and its forked workers crashed here): no forked workers are run for it
    fork_safe: bool = True

    @property
    def nbytes(self) -> int:
        """Apparent bytes of every file (what ``ls -l`` adds up)."""
        return sum(p.stat().st_size for p in self.files())

    @property
    def disk_bytes(self) -> int:
        """Bytes allocated on disk (``st_blocks``): small files round up to a block each."""
        return sum(p.stat().st_blocks * 512 for p in self.files())

    def files(self) -> list[Path]:
        extra = [index_path(self.path)] if index_path(self.path).exists() else []
        return source_files(self.path, missing_ok=True) + extra


def _write_npy_files(dest: Path, rows) -> float:
    dest.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    for i in range(len(rows)):
        np.save(dest / f"{i:07d}.npy", np.asarray(rows[i]))
    return time.perf_counter() - t0


def _write_npy(dest: Path, rows) -> float:
    t0 = time.perf_counter()
    np.save(dest, np.asarray(rows))
    return time.perf_counter() - t0


def write_formats(rows: np.ndarray, dest, chunk_rows: int = 64) -> list[StoredFormat]:
    """Write ``rows`` (samples x features) in every format under ``dest``; returns them."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    rows = np.ascontiguousarray(rows)
    d = {k: dest / v for k, v in [("files", "files"), ("npy", "rows.npy"),
                                  ("lmdb", "rows.lmdb"), ("h5c", "contiguous.h5"),
                                  ("h5k", "chunked.h5"), ("h5z", "chunked-gzip.h5"),
                                  ("tfr", "rows.tfrecord"), ("pt", "tensors")]}
    out = [
        StoredFormat("file per sample (.npy)", "files", d["files"],
                     _write_npy_files(d["files"], rows), lambda: NpyFilesDataset(d["files"])),
        StoredFormat("one .npy, memmap", "npy", d["npy"], _write_npy(d["npy"], rows),
                     lambda: MemmapRows(d["npy"])),
        StoredFormat("LMDB", "lmdb", d["lmdb"], write_lmdb(d["lmdb"], rows),
                     lambda: LmdbRows(d["lmdb"])),
        StoredFormat("HDF5 contiguous", "hdf5", d["h5c"], write_hdf5(d["h5c"], rows),
                     lambda: Hdf5Rows(d["h5c"])),
        StoredFormat(f"HDF5 chunked ({chunk_rows} rows)", "hdf5", d["h5k"],
                     write_hdf5(d["h5k"], rows, chunk_rows=chunk_rows),
                     lambda: Hdf5Rows(d["h5k"])),
        StoredFormat("HDF5 chunked + gzip", "hdf5", d["h5z"],
                     write_hdf5(d["h5z"], rows, chunk_rows=chunk_rows, compression="gzip"),
                     lambda: Hdf5Rows(d["h5z"])),
        StoredFormat("TFRecord + index", "tfrecord", d["tfr"], write_tfrecord(d["tfr"], rows),
                     lambda: TFRecordRows(d["tfr"])),
        StoredFormat("torch.save per sample", "torch.save", d["pt"],
                     write_tensor_files(d["pt"], rows), lambda: TensorFiles(d["pt"])),
    ]
    return out


def write_tensor_formats(rows: np.ndarray, dest) -> tuple[list[StoredFormat], str]:
    """``rows`` as one tensor file: ``torch.save`` (read with ``torch.load(mmap=True)``) and,
    where the optional package is installed, safetensors. Returns the formats, and a note
    saying which were skipped and why ("" when none)."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    pt, st = dest / "rows.pt", dest / "rows.safetensors"
    out = [StoredFormat("torch.load(mmap=True)", "torch.save", pt, write_torch_tensor(pt, rows),
                        lambda: TorchMmapRows(pt))]
    ok, why = status("safetensors")
    if ok:
        out.append(StoredFormat("safetensors", "safetensors", st, write_safetensors(st, rows),
                                lambda: SafetensorsRows(st)))
    return out, "" if ok else f"safetensors skipped: {why}"


def write_more_formats(rows: np.ndarray, dest) -> tuple[list[StoredFormat], list[str]]:
    """``rows`` as a Lance dataset and an ArrayRecord file, each where its optional library
    (the ``moreformats`` extra) is installed. Returns the formats, and one line per library
    that was not run, saying why and how to install it."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    lp, ap = dest / "rows.lance", dest / "rows.array_record"
    out, notes = [], []
    ok, why = status("lance")
    if ok:
        out.append(StoredFormat("Lance", "lance", lp, write_lance(lp, rows),
                                lambda: LanceRows(lp), fork_safe=False))
    else:
        notes.append(f"Lance not run: {why}")
    ok, why = status("array_record")
    if ok:
        out.append(StoredFormat("ArrayRecord", "arrayrecord", ap, write_array_record(ap, rows),
                                lambda: ArrayRecordRows(ap, dtype=rows.dtype)))
    else:
        notes.append(f"ArrayRecord not run: {why}")
    return out, notes


def read_back(fmt: StoredFormat) -> tuple[int, str]:
    """Every sample read back in index order: ``(samples, sha256 of their bytes)``."""
    ds = fmt.make()
    h = hashlib.sha256()
    for i in range(len(ds)):
        x, _ = ds[i]
        h.update(x.numpy().tobytes())
    return len(ds), h.hexdigest()


def open_cost(fmt: StoredFormat, repeats: int = 3) -> float:
    """Median seconds to build the dataset and read its first sample (open + check + read)."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fmt.make()[0]
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


@dataclass
class FormatRow:
    """What was measured for one format (one row of the chapter's table)."""

    fmt: StoredFormat
    open_s: float
    random: dict[int, Measurement]  # num_workers -> random-order measurement
    sequential: Measurement
    fork: str = "not checked"   # trap_trial outcome under fork, after the parent read
    spawn: str = "not checked"  # "pickles" (path only: what spawn and forkserver need) or why not

    @property
    def facts(self) -> tuple[str, str]:
        return FACTS[self.fmt.family]


def spawn_ready(ds) -> str:
    """``"pickles"`` if the dataset survives a pickle round trip (what spawn and forkserver
    workers receive) and reads the same first sample after it; else why not."""
    try:
        clone = pickle.loads(pickle.dumps(ds))
    except Exception as e:  # each library refuses in its own words
        return f"no: {type(e).__name__}: {e}"[:80]
    same = clone[0][0].numpy().tobytes() == ds[0][0].numpy().tobytes()
    return "pickles" if same else "pickles, reads differ"


def measure_formats(formats: list[StoredFormat], loader_for: Callable, *, num_workers: int = 2,
                    repeats: int = 3, warmup: int = 1, max_batches: int | None = None,
                    reference: np.ndarray | None = None) -> list[FormatRow]:
    """Random access with 0 and ``num_workers`` workers, and sequential, for each format.

    ``loader_for(dataset, num_workers=..., shuffle=...)`` is the caller's DataLoader factory
    (chapter 12 writes it); each format's reader is measured through the loaders it returns:
    ``shuffle=True`` for random access, ``shuffle=False, num_workers=0`` for sequential.

    With ``reference`` (the rows that were written), each reader is also run once through
    ``num_workers`` forked workers after the parent read through it, every row compared
    (:func:`~labkit.trap_trial`, in batches of the factory's batch size), and checked to
    pickle (:func:`spawn_ready`). A format that is not ``fork_safe`` is measured in the main
    process only (no forked workers).
    """
    rows = []
    for fmt in formats:
        ds = fmt.make()
        kw = {"repeats": repeats, "warmup": warmup, "max_batches": max_batches}
        random = {nw: measure(loader_for(ds, num_workers=nw, shuffle=True),
                              name=f"{fmt.name}, random, {nw} workers", **kw)
                  for nw in sorted({0, num_workers if fmt.fork_safe else 0})}
        sequential = loader_for(ds, num_workers=0, shuffle=False)
        seq = measure(sequential, name=f"{fmt.name}, sequential", **kw)
        row = FormatRow(fmt, open_cost(fmt), random, seq)
        if not fmt.fork_safe:
            row.fork = "not run"
        if reference is not None:
            ds[0]  # the parent reads first, as a notebook does
            if fmt.fork_safe and num_workers > 0:
                forked = DataLoader(ds, batch_size=sequential.batch_size, shuffle=True,
                                    num_workers=num_workers, timeout=WORKER_TIMEOUT_S,
                                    multiprocessing_context="fork")
                row.fork = trap_trial(forked, reference).outcome
            row.spawn = spawn_ready(ds)
        rows.append(row)
    return rows


def _rate(m: Measurement | None) -> str:
    if m is None:
        return "not run"
    lo, hi = m.samples_per_s_range
    return f"{m.samples_per_s:,.0f}" + (f" ({lo:,.0f}-{hi:,.0f})" if len(m.passes) > 1 else "")


def format_formats(rows: list[FormatRow], facts: bool = True) -> str:
    """The table, one line per format: sizes, write and open cost, samples/s (range)."""
    nws = sorted({nw for r in rows for nw in r.random})
    columns = {"format": "<", "write s": ">.2f", "MiB": ">.2f", "on disk": ">.2f",
               "open ms": ">.2f", **{f"random {nw}w": ">" for nw in nws}, "sequential": ">",
               "fork": "<", "spawn": "<"}
    lines = [text_table(columns, [
        [r.fmt.name, r.fmt.write_s, r.fmt.nbytes / 2**20, r.fmt.disk_bytes / 2**20,
         r.open_s * 1e3, *(_rate(r.random.get(nw)) for nw in nws), _rate(r.sequential),
         r.fork, r.spawn.split(":")[0]] for r in rows], rule=True)]
    lines.append("samples/s: median (min-max over passes); on disk = allocated blocks, MiB; "
                 "fork: every row right through forked workers after the parent read; "
                 "spawn: the dataset pickles (path only)")
    if facts:
        lines.append("")
        seen = []
        for r in rows:
            if r.fmt.family not in seen:
                seen.append(r.fmt.family)
                resume, store = r.facts
                lines.append(f"{r.fmt.family:<11} resume: {resume}; object store: {store}")
    return "\n".join(lines)
