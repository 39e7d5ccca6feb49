"""The decode ceilings of ``labkit roofline``: JPEG, augmentation, video, the GPU (ch. 00, 16).

Registered in :data:`.ceilings.CEILINGS` like the others (:func:`.ceilings.ceiling`); work is
counted in pixels, so a ceiling measured on the fixture's images holds for another size
(decode cost grows with the pixels, less a fixed cost per image).
"""

from __future__ import annotations

import functools
import statistics

import torch

from ..data.fixtures import fixture, source_files
from ..images.augment import make_augment
from ..images.decode import available_decoders, decode_jpeg, file_bytes
from ..images.gpu import gpu_decode_rate
from ..media.decoders import decode_all, video_info
from ..optional import status
from .ceilings import MIB, Missing, ceiling, trial_rates

# -- decode and augment, per core -----------------------------------------------------------

@functools.lru_cache(maxsize=1)   # four ceilings read the same files: once
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
        rates = trial_rates(px * len(blobs), lambda n=name: [decode_jpeg(b, n) for b in blobs])
        if best is None or statistics.median(rates) > statistics.median(best):
            best = rates
    return best


@ceiling("jpeg_decode_pil", "Pillow JPEG decode", "px", "core",
         "Pillow over the images fixture, one core (the decoder most pipelines start with)")
def jpeg_decode_pil(scale: str) -> list[float]:
    blobs, px = _jpegs(scale)
    return trial_rates(px * len(blobs), lambda: [decode_jpeg(b, "pil") for b in blobs])


@ceiling("augment", "augmentation", "px", "core",
         "crop, resize, flip, colour, normalise in torch per sample, output pixels, one core")
def augment(scale: str) -> list[float]:
    blobs, _ = _jpegs(scale)
    images = [decode_jpeg(b) for b in blobs]
    size = images[0].shape[0]
    fn = make_augment("torch", size)
    return trial_rates(size * size * len(images), lambda: [fn(i) for i in images])


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
    return trial_rates(px, lambda: [decode_all(f, backend) for f in files], repeats=3)


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
    return trial_rates(n, lambda: t.to("cuda", non_blocking=pinned), repeats=10, sync="cuda")


@ceiling("h2d_pageable", "host-to-device, pageable", "B", "device",
         "64 MiB from ordinary memory with .to('cuda'), synchronised")
def h2d_pageable(scale: str) -> list[float]:
    return _h2d(False)


@ceiling("h2d_pinned", "host-to-device, pinned", "B", "device",
         "64 MiB from pinned memory with .to('cuda', non_blocking=True), synchronised")
def h2d_pinned(scale: str) -> list[float]:
    return _h2d(True)


@ceiling("gpu_decode", "GPU JPEG decode (nvJPEG)", "px", "device",
         "torchcodec's decode_jpeg on the GPU (torchvision's for a torchcodec before 0.16), "
         "batches of 64 of the images fixture")
def gpu_decode(scale: str) -> list[float]:
    _cuda()
    ok, why = status("gpu_decode")
    if not ok:
        raise Missing(why)
    blobs, px = _jpegs(scale)
    return [px * gpu_decode_rate(blobs)["samples_per_s"] for _ in range(3)]
