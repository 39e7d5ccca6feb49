"""The bake-off's adapters: one per loading library, each probed before it runs (ch. 16)."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Subset, default_collate

from ...errors import LabkitError
from ...formats.hdf5rows import Hdf5Rows
from ...formats.lmdbrows import LmdbRows
from ...images.folder import ImageFolderDataset
from ...loading.loaders import WORKER_TIMEOUT_S
from ...optional import library_status, library_version, status
from ...scale import resolve_scale
from .data import BakeoffData, ensure_format
from .datasets import (
    ArrowImageBatches,
    ImageRows,
    TarImageStream,
    _HFDecode,
    _sample,
)
from .s3row import webdataset_s3, webdataset_tar
from .systemrows import _import_streaming, _litdata, _mosaic_streaming, _ray_data


@dataclass(frozen=True)
class LoaderAdapter:
    """One loader in the bake-off.

    ``modules`` must import (checked with ``importlib.util.find_spec`` first, then a real
    import, since a wheel built for another torch can fail with any exception); ``dist`` is
    the distribution whose version is reported; ``install`` the command that installs it;
    ``build(data, batch_size, num_workers, decoder)`` returns a re-iterable of batches.
    """

    name: str
    dist: str
    modules: tuple[str, ...]
    install: str
    build: Callable
    core: bool = True
    needs_cuda: bool = False
    fmt: str | None = None  # the format build() reads (its conversion is reported with it)
    note: str = ""
    # () -> why the library cannot run next to this kit's pins (installed or not), or None
    blocker: Callable[[], str | None] | None = None
    # start-up over a ci-scale chapter's budget (Ray's ~20-80 s on 2 busy cores): skipped at
    # ci, with the reason; tests/test_objstore_systems.py runs these in CI (chapter 14)
    slow_start: bool = False
    # (module name) -> imports it; None: importlib.import_module (MosaicML needs its own)
    importer: Callable[[str], object] | None = None


def probe_loader(adapter: LoaderAdapter) -> tuple[bool, str]:
    """``(True, version)`` if the adapter can run here, else ``(False, reason)``.

    The reason names the library and how to install it, or, when installing it would not
    help (its ``blocker``), why not.
    """
    blocked = adapter.blocker() if adapter.blocker else None
    hint = f"installing it does not help: {blocked}" if blocked else adapter.install
    ok, why = library_status(adapter.dist, *adapter.modules, install=hint,
                             importer=adapter.importer)
    if not ok:
        return False, why
    if adapter.slow_start:
        if resolve_scale() == "ci":
            return False, (f"{adapter.dist}: start-up over the ci-scale budget, run from "
                           "workshop scale up (tests/test_objstore_systems.py runs it in CI)")
    if adapter.needs_cuda:
        ok, reason = status("cuda")
        if not ok:
            return False, f"{adapter.dist} needs a CUDA GPU: {reason}"
    return True, library_version(adapter.dist, *adapter.modules)


def _torch_map(data, batch_size, num_workers, decoder):
    ds = Subset(ImageFolderDataset(data.images, decoder=decoder), range(data.samples))
    return DataLoader(ds, batch_size=batch_size, num_workers=num_workers,
                      timeout=WORKER_TIMEOUT_S if num_workers else 0)


def _torch_iterable(data, batch_size, num_workers, decoder):
    ds = TarImageStream(ensure_format(data, "tar"), decoder)
    return DataLoader(ds, batch_size=batch_size, num_workers=num_workers,
                      timeout=WORKER_TIMEOUT_S if num_workers else 0)


def _hf_streaming(data, batch_size, num_workers, decoder):
    import datasets

    files = [str(p) for p in ensure_format(data, "parquet")]
    ds = datasets.load_dataset("parquet", data_files=files, split="train", streaming=True)
    # no with_format("torch") and no declared features: either casts the decoded uint8
    # image (torch format: every integer array to int64); the map's numpy array passes
    # through as it is, and the DataLoader's collate makes the tensors
    ds = ds.map(_HFDecode(decoder), remove_columns=["jpg"])
    return DataLoader(ds, batch_size=batch_size, num_workers=num_workers,
                      timeout=WORKER_TIMEOUT_S if num_workers else 0)


def _arrow(data, batch_size, num_workers, decoder):
    ds = ArrowImageBatches(ensure_format(data, "parquet"), batch_size, decoder)
    return DataLoader(ds, batch_size=None, num_workers=num_workers,  # batches made by ds
                      timeout=WORKER_TIMEOUT_S if num_workers else 0)


def _torchdata_nodes(data, batch_size, num_workers, decoder):
    from torch.utils.data import SequentialSampler
    from torchdata.nodes import Batcher, Loader, Mapper, ParallelMapper, SamplerWrapper

    ds = ImageFolderDataset(data.images, decoder=decoder)
    node = SamplerWrapper(SequentialSampler(range(data.samples)))
    # threads: the decoders release the GIL while they decode, and threads start instantly
    node = ParallelMapper(node, map_fn=ds.__getitem__, num_workers=max(1, num_workers),
                          method="thread", in_order=True)
    node = Mapper(Batcher(node, batch_size=batch_size, drop_last=False), default_collate)
    return Loader(node)


def _stateful_dataloader(data, batch_size, num_workers, decoder):
    from torchdata.stateful_dataloader import StatefulDataLoader

    ds = Subset(ImageFolderDataset(data.images, decoder=decoder), range(data.samples))
    return StatefulDataLoader(ds, batch_size=batch_size, num_workers=num_workers,
                              timeout=WORKER_TIMEOUT_S if num_workers else 0)


def _lmdb(data, batch_size, num_workers, decoder):
    ds = ImageRows(LmdbRows(ensure_format(data, "lmdb")), decoder)
    return DataLoader(ds, batch_size=batch_size, num_workers=num_workers,
                      timeout=WORKER_TIMEOUT_S if num_workers else 0)


def _hdf5(data, batch_size, num_workers, decoder):
    ds = ImageRows(Hdf5Rows(ensure_format(data, "hdf5")), decoder)
    return DataLoader(ds, batch_size=batch_size, num_workers=num_workers,
                      timeout=WORKER_TIMEOUT_S if num_workers else 0)


class _PetastormBatches:
    def __init__(self, url, batch_size, num_workers, decoder):
        self.url, self.batch_size = url, batch_size
        self.workers, self.decoder = max(1, num_workers), decoder

    def __iter__(self):
        from petastorm import make_batch_reader

        buf = []
        with make_batch_reader(self.url, workers_count=self.workers, num_epochs=1,
                               shuffle_row_groups=False) as reader:
            for cols in reader:
                for i, lab, jpg in zip(cols.id, cols.label, cols.jpg, strict=True):
                    buf.append(_sample(int(i), int(lab), bytes(jpg), self.decoder))
                    if len(buf) == self.batch_size:
                        yield default_collate(buf)
                        buf = []
        if buf:
            yield default_collate(buf)


def petastorm_blocker() -> str | None:
    """Why Petastorm cannot run next to pyarrow >= 15, or None once that reason is gone.

    Petastorm 0.13.1 (the newest release, checked) does ``from pyarrow.filesystem import
    LocalFileSystem`` at import (``petastorm/utils.py``); pyarrow 15 removed that module,
    and the kit needs pyarrow >= 15 (chapter 05).
    """
    try:
        gone = importlib.util.find_spec("pyarrow.filesystem") is None
    except ImportError:
        gone = True
    if not gone:
        return None
    try:
        here = f"pyarrow {version('pyarrow')} here"
    except PackageNotFoundError:
        here = "no pyarrow here"
    return (f"petastorm imports pyarrow.filesystem, which pyarrow 15 removed ({here}; the kit "
            "needs pyarrow >= 15)")


def _petastorm(data, batch_size, num_workers, decoder):
    folder = Path(ensure_format(data, "parquet")[0]).parent
    return _PetastormBatches(f"file://{folder}", batch_size, num_workers, decoder)


class _DaliBatches:
    def __init__(self, files, ids, labels, batch_size, num_workers):
        self.files, self.ids, self.labels = files, ids, labels
        self.batch_size, self.threads = batch_size, max(1, num_workers)

    def __iter__(self):
        from nvidia.dali import fn, pipeline_def
        from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

        @pipeline_def(batch_size=self.batch_size, num_threads=self.threads, device_id=0)
        def pipe():
            jpegs, ids = fn.readers.file(files=self.files, labels=self.ids, name="reader")
            return fn.decoders.image(jpegs, device="mixed"), ids

        p = pipe()
        p.build()
        it = DALIGenericIterator([p], ["image", "id"], reader_name="reader",
                                 last_batch_policy=LastBatchPolicy.PARTIAL)
        for (out,) in it:
            ids = out["id"].reshape(-1).long().cpu()
            yield {"image": out["image"].permute(0, 3, 1, 2).cpu(), "id": ids,
                   "label": self.labels[ids]}


def _dali(data, batch_size, num_workers, decoder):
    files = [str(data.images / rel) for _, _, rel in data.rows]
    ids = [int(i) for i, _, _ in data.rows]
    labels = torch.zeros(max(ids) + 1, dtype=torch.int64)  # id -> label
    for i, lab, _ in data.rows:
        labels[i] = lab
    return _DaliBatches(files, ids, labels, batch_size, num_workers)


_PIP = "install it with: pip install "
ADAPTERS: tuple[LoaderAdapter, ...] = (
    LoaderAdapter("torch map-style", "torch", ("torch",), _PIP + "torch", _torch_map,
                  note="ImageFolderDataset + DataLoader: the baseline"),
    LoaderAdapter("torch IterableDataset", "torch", ("torch",), _PIP + "torch",
                  _torch_iterable, fmt="tar",
                  note="tar shards by hand (tarfile), shards split over workers"),
    LoaderAdapter("WebDataset", "webdataset", ("webdataset",), _PIP + "webdataset",
                  webdataset_tar, fmt="tar", note="WebDataset + WebLoader over the tar shards"),
    LoaderAdapter("HF datasets streaming", "datasets", ("datasets",), _PIP + "datasets",
                  _hf_streaming, fmt="parquet",
                  note="load_dataset('parquet', streaming=True) + DataLoader"),
    LoaderAdapter("Arrow", "pyarrow", ("pyarrow",), _PIP + "pyarrow", _arrow, fmt="parquet",
                  note="pyarrow row groups split over workers, batches yielded"),
    LoaderAdapter("torchdata.nodes", "torchdata", ("torchdata.nodes",), _PIP + "torchdata",
                  _torchdata_nodes, note="ParallelMapper with threads (num_workers threads)"),
    LoaderAdapter("StatefulDataLoader", "torchdata", ("torchdata.stateful_dataloader",),
                  _PIP + "torchdata", _stateful_dataloader, note="a resumable DataLoader"),
    LoaderAdapter("LMDB", "lmdb", ("lmdb",), _PIP + "lmdb", _lmdb, fmt="lmdb",
                  note="a key per JPEG, map-style, opened lazily in each worker (ch. 12)"),
    LoaderAdapter("HDF5", "h5py", ("h5py",), _PIP + "h5py", _hdf5, fmt="hdf5",
                  note="variable-length uint8 JPEGs, map-style, opened lazily (ch. 12)"),
    LoaderAdapter("WebDataset over S3", "webdataset", ("webdataset", "boto3", "moto"),
                  _PIP + "webdataset boto3 'moto[s3,server]'", webdataset_s3, fmt="tar",
                  note="the tar shards in the loopback S3 store, 20 ms first byte, presigned "
                       "URLs (ch. 14)"),
    LoaderAdapter("Ray Data", "ray", ("ray", "ray.data"), _PIP + "'ray[data]'", _ray_data,
                  fmt="parquet", core=False, slow_start=True,
                  note="read_parquet + map_batches + iter_torch_batches"),
    LoaderAdapter("MosaicML Streaming", "mosaicml-streaming", ("streaming",),
                  _PIP + "mosaicml-streaming", _mosaic_streaming, fmt="mds", core=False,
                  slow_start=True, importer=_import_streaming,
                  note="MDS shards + StreamingDataset + DataLoader"),
    LoaderAdapter("LitData", "litdata", ("litdata",), _PIP + "litdata", _litdata,
                  fmt="litdata", core=False, slow_start=True,
                  note="optimize() chunks + StreamingDataset + StreamingDataLoader"),
    LoaderAdapter("DALI", "nvidia-dali-cuda130", ("nvidia.dali",),
                  _PIP + "nvidia-dali-cuda130 (a CUDA 13 torch; -cuda120 for CUDA 12)", _dali,
                  core=False,
                  needs_cuda=True, note="file reader + mixed (GPU) decoder"),
    LoaderAdapter("Petastorm", "petastorm", ("petastorm",), _PIP + "petastorm", _petastorm,
                  fmt="parquet", core=False, blocker=petastorm_blocker,
                  note="make_batch_reader over the Parquet shards"),
)


def loader_names(core_only: bool = False) -> list[str]:
    """The adapters' names, core ones first."""
    return [a.name for a in ADAPTERS if a.core or not core_only]


def get_adapter(name: str) -> LoaderAdapter:
    for a in ADAPTERS:
        if a.name == name:
            return a
    raise KeyError(f"no bake-off adapter {name!r}; choose one of {', '.join(loader_names())}")


def build_loader(name: str, data: BakeoffData, *, batch_size: int = 32, num_workers: int = 0,
                 decoder: str = "pil"):
    """The named adapter's loader over ``data`` (raises with the reason if it cannot run)."""
    a = get_adapter(name)
    ok, why = probe_loader(a)
    if not ok:
        raise LabkitError(f"{name}: {why}")
    return a.build(data, batch_size, num_workers, decoder)


# -- running it -----------------------------------------------------------------------------

