"""The cross-library bake-off: one fixture, one train step, every loader installed (ch. 12).

Every adapter reads the same JPEGs (the ``images`` fixture, converted at run time to the
format its library wants: tar shards, Parquet, MDS, LitData chunks; conversion is timed on
its own, never inside a loader's throughput), decodes them with the same decoder and yields
the same batches: ``{"image": uint8 NCHW, "label": int64, "id": int64}``. :func:`run_bakeoff`
measures each with the meter and the same train step, audits that every id came exactly
once, and reports a ratio against torch's map-style DataLoader measured in the same run.

A library that is not installed (or cannot run here: DALI needs CUDA) is skipped with the
reason and the command that installs it; :func:`probe_loader` says which.
"""

from __future__ import annotations

import importlib
import importlib.util
import multiprocessing
import shutil
import tarfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import IterableDataset, Subset, default_collate

from ..data.writers import _tar_add
from ..images.decode import ImageFolderDataset, decode_jpeg, file_bytes, read_labels
from ..instruments.audits import Audit
from ..instruments.meter import Measurement
from ..loading.loaders import DEFAULT_TIMEOUT_S, make_loader, shutdown
from ..streams.split import assign, current_split

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
    tars = [tarfile.open(p, "w") for p in paths]
    try:
        for k, (sample_id, label, jpg) in enumerate(data.blobs()):
            tar = tars[k * data.shards // data.samples]  # contiguous runs, in order
            key = f"{sample_id:07d}"
            for ext, payload in (("jpg", jpg), ("cls", str(label).encode()),
                                 ("id", str(sample_id).encode())):
                _tar_add(tar, f"{key}.{ext}", payload)
    finally:
        for t in tars:
            t.close()
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
    paths = []
    for s in range(data.shards):
        lo, hi = s * data.samples // data.shards, (s + 1) * data.samples // data.shards
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
    """LitData's optimized chunks (``litdata.optimize``)."""
    import litdata

    folder = data.dest / "litdata"
    items = list(data.blobs())
    # optimize() sets the process-wide start method to spawn and leaves it so: every later
    # DataLoader here would start its workers by spawn. Put the previous one back.
    method = multiprocessing.get_start_method(allow_none=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            litdata.optimize(fn=_litdata_item, inputs=items, output_dir=str(folder),
                             chunk_bytes="4MB", num_workers=1, mode="overwrite")
    finally:
        multiprocessing.set_start_method(method, force=True)
    return folder


WRITERS: dict[str, Callable[[BakeoffData], object]] = {
    "tar": _write_tar, "parquet": _write_parquet, "mds": _write_mds, "litdata": _write_litdata}


def prepare_bakeoff(images, dest, *, samples: int | None = None, shards: int = 4,
                 row_group: int = 64, formats=("tar", "parquet")) -> BakeoffData:
    """Write the first ``samples`` images of ``images`` into each of ``formats`` under ``dest``.

    Each conversion is timed (``conversion_s``). More formats can be added later with
    :func:`ensure_format` (the adapters ask for theirs).
    """
    folder = Path(getattr(images, "path", images))
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


def _worker_kw(num_workers: int) -> dict:
    """``timeout=`` for loaders with workers (torch refuses it without), as make_loader does."""
    return {"timeout": DEFAULT_TIMEOUT_S} if num_workers else {}


# -- the datasets the adapters share (module level: workers must unpickle them) -------------

def _sample(sample_id: int, label: int, jpg: bytes, decoder: str) -> dict:
    img = decode_jpeg(jpg, decoder)
    return {"image": torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1))),
            "label": int(label), "id": int(sample_id)}


class TarImageStream(IterableDataset):
    """By hand: tar shards streamed with ``tarfile``, shards split over rank x worker."""

    def __init__(self, shards, decoder: str = "pil"):
        self.shards = [str(s) for s in shards]
        self.decoder = decoder

    def __iter__(self):
        rank, world, worker, workers = current_split()
        for s in assign(len(self.shards), rank, world, worker, workers):
            members: dict[str, dict] = {}
            with tarfile.open(self.shards[s], "r|") as tar:  # streaming: no seeks
                for info in tar:
                    key, _, ext = info.name.rpartition(".")
                    members.setdefault(key, {})[ext] = tar.extractfile(info).read()
                    m = members[key]
                    if len(m) == 3:
                        del members[key]
                        yield _sample(int(m["id"]), int(m["cls"]), m["jpg"], self.decoder)


class ArrowImageBatches(IterableDataset):
    """Parquet row groups read with pyarrow, split over rank x worker, yielded as batches."""

    def __init__(self, files, batch_size: int, decoder: str = "pil"):
        import pyarrow.parquet as pq

        self.files = [str(f) for f in files]
        self.units = [(f, g) for f, path in enumerate(self.files)
                      for g in range(pq.ParquetFile(path).metadata.num_row_groups)]
        self.batch_size, self.decoder = int(batch_size), decoder

    def __iter__(self):
        import pyarrow.parquet as pq

        rank, world, worker, workers = current_split()
        opened: dict[int, object] = {}
        buf: list[dict] = []
        for u in assign(len(self.units), rank, world, worker, workers):
            f, g = self.units[u]
            if f not in opened:
                opened[f] = pq.ParquetFile(self.files[f])
            table = opened[f].read_row_group(g)
            ids, labels = table.column("id").to_numpy(), table.column("label").to_numpy()
            for i, jpg in enumerate(table.column("jpg").to_pylist()):
                buf.append(_sample(ids[i], labels[i], jpg, self.decoder))
                if len(buf) == self.batch_size:
                    yield default_collate(buf)
                    buf = []
        if buf:
            yield default_collate(buf)


class _HFDecode:
    """Picklable per-example decode for HF datasets' ``.map`` (workers re-create it)."""

    def __init__(self, decoder: str):
        self.decoder = decoder

    def __call__(self, ex: dict) -> dict:
        img = decode_jpeg(ex["jpg"], self.decoder)
        return {"image": np.ascontiguousarray(img.transpose(2, 0, 1))}


class _DecodeItem:
    """Picklable: ``{"id", "label", "jpg"}`` -> the decoded sample (a library's transform)."""

    def __init__(self, decoder: str):
        self.decoder = decoder

    def __call__(self, item: dict) -> dict:
        return _sample(item["id"], item["label"], item["jpg"], self.decoder)


class _DecodeCollate:
    """Picklable collate: decode a list of ``{"id", "label", "jpg"}`` items, then batch."""

    def __init__(self, decoder: str):
        self.decode = _DecodeItem(decoder)

    def __call__(self, items: list) -> dict:
        return default_collate([self.decode(it) for it in items])


# -- the adapters ---------------------------------------------------------------------------

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


def probe_loader(adapter: LoaderAdapter) -> tuple[bool, str]:
    """``(True, version)`` if the adapter can run here, else ``(False, reason)``.

    The reason names the library and how to install it.
    """
    for mod in adapter.modules:
        try:
            spec = importlib.util.find_spec(mod)
        except (ImportError, ValueError):  # a parent package missing or broken
            spec = None
        if spec is None:
            return False, f"{adapter.dist} is not installed ({mod} not found); {adapter.install}"
    for mod in adapter.modules:
        try:
            importlib.import_module(mod)
        except Exception as e:  # noqa: BLE001 - a mismatched build raises anything
            return False, (f"{adapter.dist} does not import here ({type(e).__name__}: "
                           f"{str(e)[:100]}); {adapter.install}")
    if adapter.needs_cuda:
        from ..loading.prefetchers import cuda_status

        ok, reason = cuda_status()
        if not ok:
            return False, f"{adapter.dist} needs a CUDA GPU: {reason}"
    try:
        return True, version(adapter.dist)
    except PackageNotFoundError:
        return True, "?"


def _torch_map(data, batch_size, num_workers, decoder):
    ds = Subset(ImageFolderDataset(data.images, decoder=decoder), range(data.samples))
    return make_loader(ds, batch_size=batch_size, num_workers=num_workers)


def _torch_iterable(data, batch_size, num_workers, decoder):
    ds = TarImageStream(ensure_format(data, "tar"), decoder)
    return make_loader(ds, batch_size=batch_size, num_workers=num_workers)


def _webdataset(data, batch_size, num_workers, decoder):
    import webdataset as wds

    def decode(sample):
        return _sample(int(sample["id"]), int(sample["cls"]), sample["jpg"], decoder)

    urls = [str(p) for p in ensure_format(data, "tar")]
    # split_by_worker is WebDataset's default; nodesplitter for ranks. No shard shuffle: the
    # same order as every other adapter (the bake-off measures loading, not shuffling).
    ds = (wds.WebDataset(urls, shardshuffle=False, empty_check=False,
                         nodesplitter=wds.split_by_node)
          .map(decode).batched(batch_size, collation_fn=default_collate, partial=True))
    kw = _worker_kw(num_workers)
    return wds.WebLoader(ds, batch_size=None, num_workers=num_workers, **kw)


def _hf_streaming(data, batch_size, num_workers, decoder):
    import datasets

    files = [str(p) for p in ensure_format(data, "parquet")]
    ds = datasets.load_dataset("parquet", data_files=files, split="train", streaming=True)
    # no with_format("torch") and no declared features: either casts the decoded uint8
    # image (torch format: every integer array to int64); the map's numpy array passes
    # through as it is, and the DataLoader's collate makes the tensors
    ds = ds.map(_HFDecode(decoder), remove_columns=["jpg"])
    return make_loader(ds, batch_size=batch_size, num_workers=num_workers)


def _arrow(data, batch_size, num_workers, decoder):
    ds = ArrowImageBatches(ensure_format(data, "parquet"), batch_size, decoder)
    return make_loader(ds, batch_size=None, num_workers=num_workers)


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
    kw = _worker_kw(num_workers)
    return StatefulDataLoader(ds, batch_size=batch_size, num_workers=num_workers, **kw)


class _RayBatches:
    """Re-iterable over a Ray dataset: each pass is one ``iter_torch_batches``."""

    def __init__(self, ds, batch_size, started_ray: bool):
        self.ds, self.batch_size, self.started_ray = ds, batch_size, started_ray

    def __iter__(self):
        for b in self.ds.iter_torch_batches(batch_size=self.batch_size):
            yield {"image": b["image"], "label": b["label"], "id": b["id"]}

    def close(self) -> None:
        """Stop the Ray processes this adapter started (``lk.shutdown`` calls it)."""
        if self.started_ray:
            import ray

            ray.shutdown()
            self.started_ray = False


def _ray_data(data, batch_size, num_workers, decoder):
    import ray

    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=max(1, num_workers), include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
    ray.data.DataContext.get_current().enable_progress_bars = False

    def decode(batch):
        imgs = [decode_jpeg(bytes(j), decoder).transpose(2, 0, 1) for j in batch["jpg"]]
        return {"image": np.stack(imgs), "label": batch["label"].astype(np.int64),
                "id": batch["id"].astype(np.int64)}

    files = [str(p) for p in ensure_format(data, "parquet")]
    ds = ray.data.read_parquet(files).map_batches(decode, batch_format="numpy")
    return _RayBatches(ds, batch_size, started)


def _mosaic_streaming(data, batch_size, num_workers, decoder):
    from streaming import StreamingDataset

    folder = ensure_format(data, "mds")
    # a StreamingDataset is iterated (it splits samples over ranks and workers itself);
    # decoding happens in the collate, which runs in the workers
    ds = StreamingDataset(local=str(folder), shuffle=False, batch_size=batch_size)
    return make_loader(ds, batch_size=batch_size, num_workers=num_workers,
                       collate_fn=_DecodeCollate(decoder))


def _litdata(data, batch_size, num_workers, decoder):
    import litdata

    folder = ensure_format(data, "litdata")
    # StreamingDataLoader takes only litdata's own datasets: decode through its transform
    ds = litdata.StreamingDataset(input_dir=str(folder), shuffle=False,
                                  transform=_DecodeItem(decoder))
    kw = _worker_kw(num_workers)
    return litdata.StreamingDataLoader(ds, batch_size=batch_size, num_workers=num_workers, **kw)


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
                  _webdataset, fmt="tar", note="WebDataset + WebLoader over the tar shards"),
    LoaderAdapter("HF datasets streaming", "datasets", ("datasets",), _PIP + "datasets",
                  _hf_streaming, fmt="parquet",
                  note="load_dataset('parquet', streaming=True) + DataLoader"),
    LoaderAdapter("Arrow", "pyarrow", ("pyarrow",), _PIP + "pyarrow", _arrow, fmt="parquet",
                  note="pyarrow row groups split over workers, batches yielded"),
    LoaderAdapter("torchdata.nodes", "torchdata", ("torchdata.nodes",), _PIP + "torchdata",
                  _torchdata_nodes, note="ParallelMapper with threads (num_workers threads)"),
    LoaderAdapter("StatefulDataLoader", "torchdata", ("torchdata.stateful_dataloader",),
                  _PIP + "torchdata", _stateful_dataloader, note="a resumable DataLoader"),
    LoaderAdapter("Ray Data", "ray", ("ray", "ray.data"), _PIP + "'ray[data]'", _ray_data,
                  fmt="parquet", core=False,
                  note="read_parquet + map_batches + iter_torch_batches"),
    LoaderAdapter("MosaicML Streaming", "mosaicml-streaming", ("streaming",),
                  _PIP + "mosaicml-streaming", _mosaic_streaming, fmt="mds", core=False,
                  note="MDS shards + StreamingDataset + DataLoader"),
    LoaderAdapter("LitData", "litdata", ("litdata",), _PIP + "litdata", _litdata,
                  fmt="litdata", core=False,
                  note="optimize() chunks + StreamingDataset + StreamingDataLoader"),
    LoaderAdapter("DALI", "nvidia-dali-cuda120", ("nvidia.dali",),
                  _PIP + "nvidia-dali-cuda120 (on a CUDA machine)", _dali, core=False,
                  needs_cuda=True, note="file reader + mixed (GPU) decoder"),
    LoaderAdapter("Petastorm", "petastorm", ("petastorm",), _PIP + "petastorm", _petastorm,
                  fmt="parquet", core=False,
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
    from ..errors import LabkitError

    a = get_adapter(name)
    ok, why = probe_loader(a)
    if not ok:
        raise LabkitError(f"{name}: {why}")
    return a.build(data, batch_size, num_workers, decoder)


# -- running it -----------------------------------------------------------------------------

@dataclass
class BakeoffResult:
    """One row of the bake-off: a measured loader, or a skipped one and why."""

    name: str
    library: str
    version: str | None
    num_workers: int
    measurement: Measurement | None = None
    audit: Audit | None = None
    skipped: str | None = None
    error: str | None = None
    ratio: float | None = None
    conversion_s: float | None = None

    @property
    def ok(self) -> bool:
        return self.measurement is not None

    @property
    def samples_per_s(self) -> float | None:
        from .capstone import epoch_rate

        return epoch_rate(self.measurement) if self.measurement else None

    def as_dict(self) -> dict:
        m = self.measurement
        return {
            "loader": self.name, "library": self.library, "version": self.version,
            "num_workers": self.num_workers,
            "samples_per_s": None if m is None else round(self.samples_per_s, 1),
            "steady_samples_per_s": None if m is None else round(m.samples_per_s, 1),
            "ratio_vs_torch_map": None if self.ratio is None else round(self.ratio, 3),
            "first_batch_s": None if m is None else round(m.first_batch_s, 4),
            "exactly_once": None if self.audit is None else self.audit.ok,
            "conversion_s": None if self.conversion_s is None else round(self.conversion_s, 3),
            "skipped": self.skipped, "error": self.error,
        }


def _run_one(name: str, label: str, data: BakeoffData, step: Callable, batch_size: int,
             num_workers: int, decoder: str, repeats: int, warmup: int) -> BakeoffResult:
    from .capstone import measure_audited

    a = get_adapter(name)
    ok, why = probe_loader(a)
    r = BakeoffResult(label, a.dist, why if ok else None, num_workers)
    if not ok:
        r.skipped = why
        return r
    fmt = a.fmt
    loader = None
    try:
        if fmt is not None:
            ensure_format(data, fmt)
            r.conversion_s = data.conversion_s[fmt]
        loader = a.build(data, batch_size, num_workers, decoder)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. more workers than cores / shards
            r.measurement, r.audit = measure_audited(
                lambda: loader, step, [i for i, _, _ in data.rows], repeats=repeats,
                warmup=warmup, name=label,
                config={"num_workers": num_workers, "batch_size": batch_size})
    except Exception as e:  # noqa: BLE001 - one broken library must not stop the rest
        if name == ADAPTERS[0].name:
            raise
        r.error = f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:160]}"
    finally:
        shutdown(loader)
    return r


#: The name of the baseline's second measurement, at the end of a run.
AGAIN = " (again)"


def run_bakeoff(data: BakeoffData, step: Callable, *, names=None, batch_size: int = 32,
                num_workers: int = 2, decoder: str = "pil", repeats: int = 2, warmup: int = 1,
                recheck_baseline: bool = True) -> list[BakeoffResult]:
    """Measure every adapter (or ``names``) over ``data`` with the same step; audit each.

    The torch map-style baseline is measured first, in the same run, and with
    ``recheck_baseline`` once more at the end (``"torch map-style (again)"``): every ratio
    is against the mean of the two, so a machine that got busier or quieter during the run
    (other programs, thermal limits) shows up as the two baseline rows disagreeing instead
    of favouring whichever loaders ran in the quiet part. A library that is absent is
    skipped with its reason; one that fails while running is reported with its error, and
    the bake-off goes on.
    """
    wanted = list(names) if names is not None else loader_names()
    baseline = ADAPTERS[0].name
    order = [(baseline, baseline)] + [(n, n) for n in wanted if n != baseline]
    if recheck_baseline and len(order) > 1:
        order.append((baseline, baseline + AGAIN))
    results: list[BakeoffResult] = []
    for name, label in order:
        results.append(_run_one(name, label, data, step, batch_size, num_workers, decoder,
                                repeats, warmup))
    bases = [r.samples_per_s for r in results if r.name.startswith(baseline)]
    base = sum(bases) / len(bases)
    for r in results:
        if r.ok:
            r.ratio = r.samples_per_s / base
    return results


def format_bakeoff(results: list[BakeoffResult]) -> str:
    """A text table: library, version, samples/s, x torch map-style, first batch, audit."""
    head = (f"{'loader':<25}{'library':<20}{'version':<12}{'samples/s':>10}{'x map':>7}"
            f"{'first ms':>9}  exactly once")
    lines = [head, "-" * len(head)]
    for r in results:
        if r.ok:
            lines.append(f"{r.name:<25}{r.library:<20}{r.version or '':<12}"
                         f"{r.samples_per_s:>10,.0f}{r.ratio:>7.2f}"
                         f"{r.measurement.first_batch_s * 1e3:>9.0f}  "
                         f"{'ok' if r.audit.ok else 'NO: ' + _audit_line(r.audit)}")
        else:
            why = f"skipped: {r.skipped}" if r.skipped else f"failed: {r.error}"
            lines.append(f"{r.name:<25}{r.library:<20}{'':<12}{why}")
    return "\n".join(lines)


def _audit_line(a: Audit) -> str:
    return f"{a.duplicates} duplicates, {a.missing} missing"


def cleanup_bakeoff(data: BakeoffData) -> None:
    """Remove the formats written for the bake-off (the fixture itself is never touched)."""
    shutil.rmtree(data.dest, ignore_errors=True)
