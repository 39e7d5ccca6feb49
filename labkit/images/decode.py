"""JPEG decoders: bytes to an RGB uint8 HxWx3 array; the fastest here (ch. 09, 10, 14, 16)."""

from __future__ import annotations

import contextlib
import functools
import importlib
import io
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..instruments.timer import best_of


def _pil(data: bytes) -> np.ndarray:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        return np.array(im.convert("RGB"))  # writable, like the other decoders


def _opencv(data: bytes) -> np.ndarray:
    import cv2

    bgr = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    if bgr is None:  # OpenCV signals a bad image by returning None, not raising
        raise ValueError("cv2.imdecode could not decode the data")
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


def _simplejpeg(data: bytes) -> np.ndarray:
    import simplejpeg

    return simplejpeg.decode_jpeg(data, colorspace="RGB")


DECODERS: dict[str, Callable[[bytes], np.ndarray]] = {
    "pil": _pil, "opencv": _opencv, "simplejpeg": _simplejpeg}


@functools.cache
def _opencv_single_thread(pid: int) -> None:
    # OpenCV starts its own thread pool per process; inside DataLoader workers that
    # oversubscribes the cores the workers already fill. Once per process (workers fork).
    import cv2

    cv2.setNumThreads(1)


def available_decoders() -> list[str]:
    """The names in :data:`DECODERS` whose library imports here."""
    out = []
    for name, mod in {"pil": "PIL.Image", "opencv": "cv2", "simplejpeg": "simplejpeg"}.items():
        with contextlib.suppress(Exception):  # a broken install is "not available"
            importlib.import_module(mod)
            out.append(name)
    return out


def decode_jpeg(data: bytes, decoder: str = "pil") -> np.ndarray:
    """Decode JPEG ``data`` to an RGB uint8 array (H, W, 3) with the named decoder."""
    try:
        fn = DECODERS[decoder]
    except KeyError:
        raise ValueError(f"decoder={decoder!r}: choose one of {', '.join(DECODERS)}") from None
    if decoder == "opencv":
        _opencv_single_thread(os.getpid())
    img = fn(data)
    if img.ndim != 3 or img.shape[2] != 3:
        raise ValueError(f"decoded to shape {img.shape}, expected (H, W, 3)")
    return img


def file_bytes(paths) -> list[bytes]:
    """Read each file in ``paths`` (the encoded JPEGs a decode benchmark starts from); a
    picklable ``collate_fn`` for workers that read bytes only (chapter 10b)."""
    return [Path(p).read_bytes() for p in paths]


def fastest_decoder(blobs: list[bytes], rounds: int = 2) -> tuple[str, dict[str, float]]:
    """``(fastest, {decoder: images/s})`` on one core over ``blobs`` (best of ``rounds``), for
    every decoder that imports here: the decoders a chapter can choose from."""
    rates = {}
    for name in available_decoders():
        # the warm-up round takes imports and cold caches out of the figure
        t = best_of(lambda name=name: [decode_jpeg(b, name) for b in blobs], repeats=rounds)
        rates[name] = len(blobs) / t.best_s
    return max(rates, key=rates.get), rates

