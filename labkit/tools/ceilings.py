"""The ceilings of ``labkit roofline``, each measured alone with its spread (ch. 00, 16).

One function per ceiling, registered in :data:`CEILINGS`; each returns the rate of every
timed trial (work per second, in one process) or raises :class:`Missing` saying why this
machine cannot measure it. :func:`labkit.tools.roofline.measure` runs the ones asked for.
The decode ceilings (JPEG, augmentation, video, the GPU's) are in :mod:`.ceilings_media`.
Sizes follow the scale: under a minute in all at ci scale. Chapter 00 builds the first two
by hand (a page-cache read, memcpy).
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from .. import paths
from ..errors import LabkitError
from ..facilities import has, why_not
from ..instruments.pagecache import evict_page_cache
from ..instruments.timer import best_of
from ..loading.loaders import WORKER_TIMEOUT_S
from ..objstore.store import s3_store
from ..tokens.windows import SAMPLERS, random_windows

MIB = 2 ** 20
READ_MIB = {"ci": 64, "workshop": 256, "full": 1024}
S3_LATENCY_S = 0.02   # a far region's first byte (chapter 14's model)


class Missing(LabkitError):
    """This machine cannot measure a ceiling; the message says why."""


@dataclass(frozen=True)
class Spec:
    label: str
    work: str
    where: str
    how: str
    fn: Callable[[str], list[float]]


CEILINGS: dict[str, Spec] = {}


def ceiling(name: str, label: str, work: str, where: str, how: str):
    def register(fn):
        CEILINGS[name] = Spec(label, work, where, how, fn)
        return fn
    return register


def trial_rates(work: float, fn, repeats: int = 5, sync=None) -> list[float]:
    """``work`` per second of each timed call of ``fn`` (one warm-up call first)."""
    return [work / s for s in best_of(fn, repeats=repeats, warmup=1, sync=sync).trials_s]


# -- reads and copies -----------------------------------------------------------------------

def _read_file(scale: str) -> Path:
    """A file of random bytes on the data disk (not /tmp, which may be memory)."""
    size = READ_MIB[scale] * MIB
    folder = paths.data_dir() / "roofline"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"read-{size // MIB}MiB.bin"
    if not path.exists() or path.stat().st_size != size:
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        rng = np.random.default_rng(0)
        with open(tmp, "wb") as f:
            for _ in range(size // (16 * MIB)):
                f.write(rng.bytes(16 * MIB))
        os.replace(tmp, path)
    return path


def _read_all(path: Path, buf: bytearray) -> int:
    n = 0
    with open(path, "rb", buffering=0) as f:
        while k := f.readinto(buf):
            n += k
    return n


@ceiling("cold_read", "cold read (disk)", "B", "device",
         "read a file after evicting it from the page cache, 4 MiB at a time")
def cold_read(scale: str) -> list[float]:
    if not has("fadvise"):
        raise Missing(why_not("fadvise"))
    path, buf = _read_file(scale), bytearray(4 * MIB)
    out = []
    for _ in range(3):
        left = evict_page_cache(path, check=False)
        if left > 0.05:
            raise Missing(f"{left:.0%} of {path} stayed in the page cache after eviction "
                          "(a filesystem held in memory, such as tmpfs or an overlay on it)")
        # no warm-up call: it would fill the page cache again
        out.append(path.stat().st_size / best_of(lambda: _read_all(path, buf), repeats=1,
                                                 warmup=0).best_s)
    return out


@ceiling("page_cache_read", "page-cache read", "B", "core",
         "read a cached file into a buffer, 4 MiB at a time")
def page_cache_read(scale: str) -> list[float]:
    path, buf = _read_file(scale), bytearray(4 * MIB)
    return trial_rates(path.stat().st_size, lambda: _read_all(path, buf))


@ceiling("mmap_read", "a read through a fresh memory map", "B", "core",
         "map a cached file afresh (np.memmap) and copy it out 64 KiB at a time, page "
         "faults included, one core")
def mmap_read(scale: str) -> list[float]:
    path, step = _read_file(scale), 64 * 1024

    def read_mapped():
        mm = np.memmap(path, np.uint8, mode="r")   # a new map: its pages fault in again
        for lo in range(0, len(mm), step):
            np.array(mm[lo:lo + step])
        del mm

    return trial_rates(path.stat().st_size, read_mapped)


@ceiling("memcpy", "memcpy", "B", "core", "np.copyto between two arrays of the read size")
def memcpy(scale: str) -> list[float]:
    n = READ_MIB[scale] * MIB
    src, dst = np.ones(n, np.uint8), np.empty(n, np.uint8)
    return trial_rates(n, lambda: np.copyto(dst, src))


# -- the hand-over from a worker ------------------------------------------------------------

class _Fresh(Dataset):
    """Fresh tensors per item, as a collated batch is (fresh memory to send): the first of
    ``nbytes``, the others (``tensors - 1``) of 8 bytes, like a batch's labels."""

    def __init__(self, nbytes: int, n: int, tensors: int = 1):
        self.nbytes, self.n, self.tensors = nbytes, n, tensors

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        first = torch.empty(self.nbytes, dtype=torch.uint8)
        if self.tensors == 1:
            return first
        return (first, *(torch.empty(1, dtype=torch.int64) for _ in range(self.tensors - 1)))


def _handover_s(nbytes: int, batches: int, tensors: int = 1, repeats: int = 3) -> list[float]:
    """Seconds per batch of ``batches`` pre-made batches of ``nbytes`` from one worker."""
    loader = DataLoader(_Fresh(nbytes, batches, tensors), batch_size=None, num_workers=1,
                        prefetch_factor=4, persistent_workers=True, timeout=WORKER_TIMEOUT_S)

    def one_pass():
        for _ in loader:
            pass

    trials = best_of(one_pass, repeats=repeats, warmup=1).trials_s
    return [s / batches for s in trials]  # the workers stop with the loader, on return


_HANDOVER: dict = {}  # (scale, what) -> seconds per batch: "one" small tensor, "four", "large"
TENSORS = 4     # the second batch's tensors: (t4 - t1) / 3 is one tensor's cost
BIG_MIB = {"ci": 4, "workshop": 8, "full": 16}


def _handover(scale: str, what: str) -> list[float]:
    """One of the three hand-over runs, each made once per measure and only when asked for
    (``labkit diagnose`` asks for the batch and the bytes, not the tensor)."""
    if (scale, what) not in _HANDOVER:
        # ci: 300 (each of the four passes still 30-300 ms); 1,000 took 9 s of CI's chapter 00
        # under every start method, on 2 cores
        n = {"ci": 300, "workshop": 3000, "full": 10000}[scale]
        _HANDOVER[scale, what] = (
            _handover_s(64, n) if what == "one" else
            _handover_s(64, n, tensors=TENSORS) if what == "four" else
            _handover_s(BIG_MIB[scale] * MIB, {"ci": 60, "workshop": 120, "full": 240}[scale]))
    return _HANDOVER[scale, what]


def _per_tensor_s(scale: str) -> list[float]:
    one, four = _handover(scale, "one"), _handover(scale, "four")
    return [max((f - o) / (TENSORS - 1), 1e-9) for o, f in zip(one, four, strict=True)]


@ceiling("handover_batch", "a batch from a worker", "batch", "main",
         "one worker hands over pre-made 64-byte batches, one tensor each (the per-batch cost)")
def handover_batch(scale: str) -> list[float]:
    return [1 / o for o in _handover(scale, "one")]


@ceiling("handover_tensor", "another tensor in a batch from a worker", "tensor", "main",
         f"batches of {TENSORS} small tensors against batches of 1, from one worker: each "
         "tensor is a shared-memory segment and a file descriptor of its own")
def handover_tensor(scale: str) -> list[float]:
    return [1 / s for s in _per_tensor_s(scale)]


@ceiling("handover_bytes", "bytes from a worker", "B", "main",
         "one worker hands over fresh 4-16 MiB tensors, less the per-batch cost")
def handover_bytes(scale: str) -> list[float]:
    big, per_batch = BIG_MIB[scale] * MIB, min(_handover(scale, "one"))
    return [big / max(s - per_batch, 1e-9) for s in _handover(scale, "large")]


# -- the DataLoader's own cost per sample -----------------------------------------------------

class _Same(Dataset):
    """Item ``i`` is always ``item``: what is left to time is the DataLoader's own cost."""

    def __init__(self, n: int, item: torch.Tensor):
        self.n, self.item = n, item

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.item


@ceiling("sample_fetch", "the DataLoader's per-sample fetch", "sample", "core",
         "__getitem__ of a 4-element tensor, sampler and default_collate, batch 256, "
         "one core")
def sample_fetch(scale: str) -> list[float]:
    n = {"ci": 20_000, "workshop": 50_000, "full": 100_000}[scale]
    loader = DataLoader(_Same(n, torch.zeros(4)), batch_size=256)
    return trial_rates(n, lambda: [None for _ in loader])


@ceiling("batch_fetch", "the DataLoader's per-batch fetch", "batch", "core",
         "batch_size=None over a dataset whose item is a whole tiny batch, one core")
def batch_fetch(scale: str) -> list[float]:
    n = {"ci": 20_000, "workshop": 50_000, "full": 100_000}[scale]
    loader = DataLoader(_Same(n, torch.zeros(4, 4)), batch_size=None)  # an item is a batch
    return trial_rates(n, lambda: [None for _ in loader])


def _small_files(name: str, suffix: str, write: Callable[[Path], object]) -> list[Path]:
    """A folder of 1,000 small files in the data folder, each written once by ``write``."""
    folder = paths.data_dir() / "roofline" / name
    files = [folder / f"{i:04d}{suffix}" for i in range(1000)]
    if not all(f.exists() for f in files):
        folder.mkdir(parents=True, exist_ok=True)
        for f in files:
            write(f)
    return files


@ceiling("file_open", "a small file opened and read", "file", "core",
         "open, read and close each 1 KiB file of a folder of 1,000, one core (page cache)")
def file_open(scale: str) -> list[float]:
    files = _small_files("small-files", ".bin", lambda f: f.write_bytes(bytes(1024)))

    def read_all():
        for f in files:
            with open(f, "rb") as fh:
                fh.read()

    return trial_rates(len(files), read_all)


@ceiling("npy_load", "a small .npy file loaded", "file", "core",
         "np.load of each 1 KiB .npy file of a folder of 1,000 (open, header parse, read, "
         "close), one core (page cache)")
def npy_load(scale: str) -> list[float]:
    files = _small_files("small-npy", ".npy", lambda f: np.save(f, np.zeros(256, np.float32)))

    def load_all():
        for f in files:
            np.load(f)

    return trial_rates(len(files), load_all)


# -- token windows --------------------------------------------------------------------------

def _drain(batches) -> None:
    """Take every batch and drop it, as a training loop does (a list would keep them all:
    the allocations, not the windows, would be timed)."""
    for _ in batches:
        pass


@ceiling("token_windows", "random token windows", "B", "core",
         "batches of 64 random 1,024-token windows of a uint16 array, the fastest sampler")
def token_windows(scale: str) -> list[float]:
    n = READ_MIB[scale] * MIB // 2
    tokens = np.random.default_rng(0).integers(0, 4096, n, dtype=np.uint16)
    # 64 windows a batch, as chapter 11's loaders take: with 8 the per-batch Python cost
    # (drawing the starts, building the batch) hid the bytes' own rate
    batches, context, batch = {"ci": 50, "workshop": 200, "full": 400}[scale], 1024, 64
    work = batches * batch * (context + 1) * tokens.itemsize
    best = None
    for how in SAMPLERS:
        if how == "python loop":
            continue
        rates = trial_rates(work, lambda h=how: _drain(random_windows(tokens, context, batch,
                                                                     batches, how=h)))
        if best is None or statistics.median(rates) > statistics.median(best):
            best = rates
    return best


# -- one S3 connection ----------------------------------------------------------------------

_S3: dict = {}


def forget() -> None:
    """Drop the figures two ceilings share (hand-over, S3): the next measure starts afresh."""
    _HANDOVER.clear()
    _S3.clear()


def _s3(scale: str) -> dict:
    """Requests/s of small GETs without and with latency, B/s of one large GET."""
    if scale in _S3:
        return _S3[scale]
    for lib in ("moto", "boto3"):
        try:
            __import__(lib)
        except ImportError as e:
            raise Missing(f"{lib} is not installed ({e}): pip install -e .") from None
    small, big = 4096, {"ci": 16, "workshop": 64, "full": 256}[scale] * MIB
    with s3_store() as store:
        s3 = store.client()
        store.make_bucket("roofline", s3)
        s3.put_object(Bucket="roofline", Key="small", Body=b"x" * small)
        s3.put_object(Bucket="roofline", Key="big", Body=np.ones(big, np.uint8).tobytes())

        def get(key, k=1):
            for _ in range(k):
                s3.get_object(Bucket="roofline", Key=key)["Body"].read()

        n = 40
        out = {"request": trial_rates(n, lambda: get("small", n)),
               "bytes": trial_rates(big, lambda: get("big"), repeats=3)}
        store.configure(latency_s=S3_LATENCY_S)
        out["latency"] = trial_rates(10, lambda: get("small", 10), repeats=3)
    _S3[scale] = out
    return out


@ceiling("s3_request", "an S3 request, one connection", "request", "device",
         "sequential GETs of a 4 KiB object from the loopback S3 store, no latency")
def s3_request(scale: str) -> list[float]:
    return _s3(scale)["request"]


@ceiling("s3_request_latency", f"an S3 request at {S3_LATENCY_S * 1e3:.0f} ms", "request",
         "device", f"the same GETs with {S3_LATENCY_S * 1e3:.0f} ms before the first byte")
def s3_request_latency(scale: str) -> list[float]:
    return _s3(scale)["latency"]


@ceiling("s3_bytes", "S3 bytes, one connection", "B", "device",
         "one large GET from the loopback S3 store, no latency")
def s3_bytes(scale: str) -> list[float]:
    return _s3(scale)["bytes"]
