"""The ceilings of ``labkit roofline``, each measured alone with its spread (ch. 00, 16).

One function per ceiling, registered in :data:`CEILINGS`; each returns the rate of every
timed trial (work per second, in one process) or raises :class:`Missing` saying why this
machine cannot measure it. :func:`labkit.tools.roofline.measure` runs the ones asked for.
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
from ..data.fixtures import fixture, source_files
from ..errors import LabkitError
from ..facilities import has, why_not
from ..images.augment import make_augment
from ..images.decode import available_decoders, decode_jpeg, file_bytes
from ..images.gpu import gpu_decode_rate
from ..instruments.pagecache import evict_page_cache
from ..instruments.timer import best_of
from ..loading.loaders import WORKER_TIMEOUT_S
from ..media.decoders import decode_all, video_info
from ..objstore.store import s3_store
from ..optional import status
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


def _rates(work: float, fn, repeats: int = 5, sync=None) -> list[float]:
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
    return _rates(path.stat().st_size, lambda: _read_all(path, buf))


@ceiling("memcpy", "memcpy", "B", "core", "np.copyto between two arrays of the read size")
def memcpy(scale: str) -> list[float]:
    n = READ_MIB[scale] * MIB
    src, dst = np.ones(n, np.uint8), np.empty(n, np.uint8)
    return _rates(n, lambda: np.copyto(dst, src))


# -- the hand-over from a worker ------------------------------------------------------------

class _Fresh(Dataset):
    """A fresh tensor of ``nbytes`` per item, as a collated batch is (fresh memory to send)."""

    def __init__(self, nbytes: int, n: int):
        self.nbytes, self.n = nbytes, n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.empty(self.nbytes, dtype=torch.uint8)


def _handover_s(nbytes: int, batches: int, repeats: int = 3) -> list[float]:
    """Seconds per batch of ``batches`` pre-made batches of ``nbytes`` from one worker."""
    loader = DataLoader(_Fresh(nbytes, batches), batch_size=None, num_workers=1,
                        prefetch_factor=4, persistent_workers=True, timeout=WORKER_TIMEOUT_S)

    def one_pass():
        for _ in loader:
            pass

    trials = best_of(one_pass, repeats=repeats, warmup=1).trials_s
    return [s / batches for s in trials]  # the workers stop with the loader, on return


_HANDOVER = {}  # scale -> (seconds per small batch, seconds per large batch, large bytes)


def _handover(scale: str):
    if scale not in _HANDOVER:
        big = {"ci": 4, "workshop": 8, "full": 16}[scale] * MIB
        small = _handover_s(64, {"ci": 1000, "workshop": 3000, "full": 10000}[scale])
        large = _handover_s(big, {"ci": 60, "workshop": 120, "full": 240}[scale])
        _HANDOVER[scale] = (small, large, big)
    return _HANDOVER[scale]


@ceiling("handover_batch", "a batch from a worker", "batch", "main",
         "one worker hands over pre-made 64-byte batches (the per-batch cost)")
def handover_batch(scale: str) -> list[float]:
    small, _, _ = _handover(scale)
    return [1 / s for s in small]


@ceiling("handover_bytes", "bytes from a worker", "B", "main",
         "one worker hands over fresh 4-16 MiB tensors, less the per-batch cost")
def handover_bytes(scale: str) -> list[float]:
    small, large, big = _handover(scale)
    per_batch = min(small)
    return [big / max(s - per_batch, 1e-9) for s in large]


# -- the DataLoader's own cost per sample -----------------------------------------------------

class _Tiny(Dataset):
    """Item ``i`` is a 4-element tensor: what is left is the DataLoader's own cost."""

    def __init__(self, n: int):
        self.n, self.item = n, torch.zeros(4)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.item


@ceiling("sample_fetch", "the DataLoader's per-sample fetch", "sample", "core",
         "__getitem__ of a 4-element tensor, sampler and default_collate, batch 256, "
         "one core")
def sample_fetch(scale: str) -> list[float]:
    n = {"ci": 20_000, "workshop": 50_000, "full": 100_000}[scale]
    loader = DataLoader(_Tiny(n), batch_size=256)
    return _rates(n, lambda: [None for _ in loader])


# -- decode and augment, per core -----------------------------------------------------------

def _jpegs(scale: str) -> tuple[list[bytes], int]:
    fx = fixture("images", scale, progress=False)
    files = source_files(fx, ".jpg")[:{"ci": 64, "workshop": 128, "full": 256}[scale]]
    blobs = file_bytes(files)
    h, w, _ = decode_jpeg(blobs[0]).shape
    return blobs, h * w


@ceiling("jpeg_decode", "JPEG decode", "px", "core",
         "the fastest CPU decoder here over the images fixture, one core")
def jpeg_decode(scale: str) -> list[float]:
    blobs, px = _jpegs(scale)
    best = None
    for name in available_decoders():
        rates = _rates(px * len(blobs), lambda n=name: [decode_jpeg(b, n) for b in blobs])
        if best is None or statistics.median(rates) > statistics.median(best):
            best = rates
    return best


@ceiling("jpeg_decode_pil", "Pillow JPEG decode", "px", "core",
         "Pillow over the images fixture, one core (the decoder most pipelines start with)")
def jpeg_decode_pil(scale: str) -> list[float]:
    blobs, px = _jpegs(scale)
    return _rates(px * len(blobs), lambda: [decode_jpeg(b, "pil") for b in blobs])


@ceiling("augment", "augmentation", "px", "core",
         "crop, resize, flip, colour, normalise in torch per sample, output pixels, one core")
def augment(scale: str) -> list[float]:
    blobs, _ = _jpegs(scale)
    images = [decode_jpeg(b) for b in blobs]
    size = images[0].shape[0]
    fn = make_augment("torch", size)
    return _rates(size * size * len(images), lambda: [fn(i) for i in images])


@ceiling("video_decode", "video decode", "px", "core",
         "every frame of the videos fixture's 1-second-keyframe files, one thread")
def video_decode(scale: str) -> list[float]:
    backend = next((b for b in ("torchcodec", "pyav") if status(b)[0]), None)
    if backend is None:
        raise Missing(f"no video decoder here: torchcodec: {status('torchcodec')[1]}; "
                      f"PyAV: {status('pyav')[1]}")
    fx = fixture("videos", scale, progress=False)
    folder = source_files(fx, ".mp4")
    files = [f for f in folder if f.name.startswith("gop025")][:2] or folder[:2]
    px = 0
    for f in files:
        info = video_info(f)
        px += info["frames"] * info["width"] * info["height"]
    return _rates(px, lambda: [decode_all(f, backend) for f in files], repeats=3)


# -- token windows --------------------------------------------------------------------------

@ceiling("token_windows", "random token windows", "B", "core",
         "batches of 8 random 1,024-token windows of a uint16 array, the fastest sampler")
def token_windows(scale: str) -> list[float]:
    n = READ_MIB[scale] * MIB // 2
    tokens = np.random.default_rng(0).integers(0, 4096, n, dtype=np.uint16)
    batches, context, batch = 200, 1024, 8
    work = batches * batch * (context + 1) * tokens.itemsize
    best = None
    for how in SAMPLERS:
        if how == "python loop":
            continue
        rates = _rates(work, lambda h=how: list(random_windows(tokens, context, batch, batches,
                                                                 how=h)))
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
        out = {"request": _rates(n, lambda: get("small", n)),
               "bytes": _rates(big, lambda: get("big"), repeats=3)}
        store.configure(latency_s=S3_LATENCY_S)
        out["latency"] = _rates(10, lambda: get("small", 10), repeats=3)
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


# -- CUDA -----------------------------------------------------------------------------------

def _cuda() -> None:
    ok, why = status("cuda")
    if not ok:
        raise Missing(why)


def _h2d(pinned: bool) -> list[float]:
    _cuda()
    n = 64 * MIB
    t = torch.empty(n, dtype=torch.uint8)
    if pinned:
        t = t.pin_memory()
    return _rates(n, lambda: t.to("cuda", non_blocking=pinned), repeats=10, sync="cuda")


@ceiling("h2d_pageable", "host-to-device, pageable", "B", "device",
         "64 MiB from ordinary memory with .to('cuda'), synchronised")
def h2d_pageable(scale: str) -> list[float]:
    return _h2d(False)


@ceiling("h2d_pinned", "host-to-device, pinned", "B", "device",
         "64 MiB from pinned memory with .to('cuda', non_blocking=True), synchronised")
def h2d_pinned(scale: str) -> list[float]:
    return _h2d(True)


@ceiling("gpu_decode", "GPU JPEG decode (nvJPEG)", "px", "device",
         "torchvision.io.decode_jpeg on the GPU, batches of 64 of the images fixture")
def gpu_decode(scale: str) -> list[float]:
    _cuda()
    ok, why = status("gpu_decode")
    if not ok:
        raise Missing(why)
    blobs, px = _jpegs(scale)
    return [px * gpu_decode_rate(blobs)["samples_per_s"] for _ in range(3)]
