"""MosaicML Streaming, LitData and Ray Data against the loopback bucket (chapters 14, 16).

The three loaders built for object stores, probed here and run on the same rows. Next to the
kit's CPU-only torch none installs plainly (PyPI's torchvision is built for a CUDA torch and
fails at import, litdata requires it, mosaicml-streaming imports it and pins numpy); the
recipe that works is ``.ci/install-objstore-systems`` (``--no-deps`` plus their real runtime
needs). The one workaround, a stand-in ``torchvision`` that exists only while
``import streaming`` runs, is :func:`import_streaming`; a test fails when it stops being
needed or stops working. What each system leaves behind is cleaned up in ``leftovers.py``.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import time
import types
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..instruments.audits import ids_of
from ..instruments.resume import resumed_ids
from ..optional import library_status
from .leftovers import MosaicShm, litdata_optimize, scoped, scoped_env, start_ray

RECIPE = ".ci/install-objstore-systems (pip --no-deps plus their runtime needs)"

SYSTEMS = {"MosaicML Streaming": ("mosaicml-streaming", "streaming"),
           "LitData": ("litdata", "litdata"),
           "Ray Data": ("ray", "ray.data")}


def _real_torchvision() -> bool:
    """Whether a torchvision that imports is installed (a CUDA build fails next to CPU torch)."""
    return library_status("torchvision", install="")[0]


def _stand_in_torchvision() -> dict[str, types.ModuleType]:
    """The names ``streaming.vision`` takes from torchvision at import, unusable on purpose."""
    def unavailable(*args, **kwargs):
        raise RuntimeError("torchvision is a stand-in here (labkit.objstore.systems): "
                           "MosaicML Streaming's vision datasets need a real torchvision")

    root = types.ModuleType("torchvision")
    ds = types.ModuleType("torchvision.datasets")
    tf = types.ModuleType("torchvision.transforms")
    fn = types.ModuleType("torchvision.transforms.functional")
    ds.VisionDataset = type("VisionDataset", (), {"__init__": unavailable})
    ds.CIFAR10 = type("CIFAR10", (), {"__init__": unavailable})
    fn.to_tensor = unavailable
    root.datasets, root.transforms, tf.functional = ds, tf, fn
    return {"torchvision": root, "torchvision.datasets": ds, "torchvision.transforms": tf,
            "torchvision.transforms.functional": fn}


def import_streaming(stand_in: bool | None = None):
    """``import streaming`` (MosaicML Streaming), past its import of torchvision.

    ``streaming/__init__.py`` imports ``streaming.vision``, which imports torchvision at
    module level. Without a torchvision that imports, a stand-in is put in ``sys.modules``
    for the import only and taken out again, so every later probe for torchvision (kornia,
    albumentations, datasets) still finds none. Nothing the kit uses touches it.
    """
    if "streaming" in sys.modules:
        return sys.modules["streaming"]
    if stand_in is None:
        stand_in = not _real_torchvision()
    if not stand_in:
        return importlib.import_module("streaming")
    import transformers.feature_extraction_utils  # noqa: F401 - before the stand-in is in
    import transformers.tokenization_utils_base  # noqa: F401

    with scoped(sys.modules, _stand_in_torchvision()):
        return importlib.import_module("streaming")


def probe_system(name: str, deep: bool = True) -> tuple[bool, str]:
    """``(True, version)`` if ``name`` runs here, else ``(False, the exact reason)``.

    ``deep=False`` only checks that it is installed (importing Ray, Mosaic and LitData
    takes seconds).
    """
    dist, module = SYSTEMS[name]
    importer = (lambda _: import_streaming()) if module == "streaming" else None
    ok, why = library_status(dist, module, install=RECIPE, load=deep, importer=importer)
    return ok, why if deep or not ok else f"{why} (installed; import not checked)"


def objectstore_systems(deep: bool = True) -> dict[str, tuple[bool, str]]:
    """Each object-store loader and whether it runs here (see :func:`probe_system`)."""
    return {name: probe_system(name, deep) for name in SYSTEMS}


@dataclass
class SystemRun:
    """One system's epoch from the bucket: rate, first batch, exactly-once, exact resume."""

    name: str
    version: str
    samples: int
    samples_per_s: float
    first_batch_s: float
    exactly_once: bool
    resume_exact: bool
    peak_rss_mib: float
    note: str = ""

    def line(self) -> str:
        return (f"{self.name:<20} {self.samples_per_s:>9,.0f} samples/s  first batch "
                f"{self.first_batch_s * 1e3:>6,.0f} ms  exactly once {self.exactly_once!s:<5} "
                f"resume exact {self.resume_exact!s:<5} peak RSS {self.peak_rss_mib:,.0f} MiB")


def _epoch(batches, ids_of) -> tuple[list[int], float, float]:
    """Ids in delivered order, whole-epoch seconds, first-batch seconds."""
    t0 = time.perf_counter()
    first, ids = None, []
    for b in batches:
        if first is None:
            first = time.perf_counter() - t0
        ids.extend(ids_of(b))
    return ids, time.perf_counter() - t0, first or 0.0


def _rss_mib() -> float:
    import psutil

    me = psutil.Process()
    return (me.memory_info().rss + sum(c.memory_info().rss for c in me.children(True)
                                       if c.is_running())) / 2**20


def run_mosaic(store, rows: np.ndarray, work: Path, batch_size: int = 64) -> SystemRun:
    """MDS shards written locally, put in the bucket, streamed with ``remote=s3://...``."""
    streaming = import_streaming()
    from streaming import MDSWriter, StreamingDataLoader, StreamingDataset

    out = work / "mds"
    with MDSWriter(out=str(out), columns={"id": "int64", "row": "bytes"},
                   size_limit=1 << 20) as w:
        for r in rows:
            w.write({"id": int(r[0]), "row": r.tobytes()})
    store.put_files("mosaic", sorted(out.rglob("*")), prefix="mds", root=out)

    def loader(local):
        ds = StreamingDataset(remote="s3://mosaic/mds", local=str(local), batch_size=batch_size,
                              shuffle=True, shuffle_seed=7, predownload=4 * batch_size)
        return StreamingDataLoader(shm.track(ds), batch_size=batch_size, num_workers=0)

    def epochs():
        ids, secs, first = _epoch(loader(work / "mds-cache"), ids_of)
        rss = _rss_mib()
        # resume: its download threads must end while the credentials are set, so drain
        caches = iter([work / "mds-cache-2", work / "mds-cache-3"])
        resumed, _ = resumed_ids(lambda: loader(next(caches)), (len(ids) // batch_size // 2,),
                                 drain=True)
        return ids, secs, first, rss, resumed

    shm = MosaicShm()
    with scoped_env(S3_ENDPOINT_URL=store.endpoint_url, **_creds(store)):
        try:
            ids, secs, first, rss, resumed = epochs()
        finally:
            shm.release()
    return SystemRun("MosaicML Streaming", streaming.__version__, len(ids), len(ids) / secs,
                     first, sorted(ids) == list(range(len(rows))),
                     resumed == ids, rss,
                     "resume: StreamingDataLoader.state_dict")


def _creds(store) -> dict:
    env = store.env()
    return {k: env[k] for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                                "AWS_DEFAULT_REGION")}


def run_litdata(store, rows: np.ndarray, work: Path, batch_size: int = 64) -> SystemRun:
    """``litdata.optimize`` locally, chunks put in the bucket, ``StreamingDataset`` on s3://."""
    import litdata as ld

    out = litdata_optimize(_litdata_item, list(rows), work / "litdata", chunk_bytes="1MB")
    store.put_files("litdata", sorted(p for p in out.rglob("*") if p.is_file()), prefix="opt",
                    root=out)
    opts = {"endpoint_url": store.endpoint_url, "aws_access_key_id": "labkit",
            "aws_secret_access_key": "labkit-secret", "region_name": "us-east-1"}

    def loader(cache):
        ds = ld.StreamingDataset("s3://litdata/opt", cache_dir=str(cache), shuffle=True, seed=7,
                                 storage_options=opts)
        return ld.StreamingDataLoader(ds, batch_size=batch_size, num_workers=0)

    ids, secs, first = _epoch(loader(work / "ld-cache"), ids_of)
    rss = _rss_mib()
    # a restart in the same place (litdata checks that the cache matches the state)
    resumed, _ = resumed_ids(lambda: loader(work / "ld-cache-2"), (len(ids) // batch_size // 2,))
    return SystemRun("LitData", ld.__version__, len(ids), len(ids) / secs, first,
                     sorted(ids) == list(range(len(rows))), resumed == ids, rss,
                     "resume: StreamingDataLoader.state_dict")


def _litdata_item(row):
    return {"id": int(row[0]), "row": np.asarray(row, dtype=np.float32)}


def run_ray(store, parquet_key: str, samples: int, batch_size: int = 64,
            num_cpus: int = 1) -> SystemRun:
    """``ray.data.read_parquet`` from the bucket (pyarrow's S3 client), ``iter_torch_batches``.

    Ray Data has no mid-epoch resume of an iterator (a run restarts its dataset); the row
    says so rather than faking one.
    """
    import logging

    import ray

    logging.getLogger("ray").setLevel(logging.WARNING)   # its progress log, line by line
    started = not ray.is_initialized()
    try:
        if started:
            start_ray(ray, num_cpus)
        ray.data.DataContext.get_current().enable_progress_bars = False
        ds = ray.data.read_parquet(f"s3://{parquet_key}", filesystem=store.arrow_filesystem())
        ids, secs, first = _epoch(ds.iter_torch_batches(batch_size=batch_size), ids_of)
        rss = _rss_mib()
    finally:
        if started:
            ray.shutdown()
    return SystemRun("Ray Data", ray.__version__, len(ids), len(ids) / secs, first,
                     sorted(ids) == list(range(samples)), False, rss,
                     "no mid-epoch resume in Ray Data: a restart re-reads the epoch")


def run_objectstore_system(name: str, store, rows: np.ndarray, work, *,
                           parquet_key: str | None = None, batch_size: int = 64) -> SystemRun:
    """Run one system (a :data:`SYSTEMS` name) on ``rows`` through ``store`` (chapter 14).

    Mosaic and LitData write their own format locally and put it in the bucket; Ray Data
    reads ``parquet_key`` (``bucket/key`` of the same rows as Parquet).
    """
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    if name == "MosaicML Streaming":
        return run_mosaic(store, rows, work, batch_size)
    if name == "LitData":
        return run_litdata(store, rows, work, batch_size)
    if name == "Ray Data":
        if parquet_key is None:
            raise ValueError("Ray Data reads Parquet: give parquet_key='bucket/key'")
        return run_ray(store, parquet_key, len(rows), batch_size)
    raise KeyError(f"no object-store system {name!r}; choose one of {', '.join(SYSTEMS)}")
