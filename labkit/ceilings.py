"""This machine's data-loading ceilings, each measured alone with its spread (chapters 00, 16).

One ceiling per kind of work a sample needs (page-cache read, copy, DataLoader fetch, worker
hand-over, JPEG decode, host-to-device), timed alone in one process over five trials; a
stage allows ``rate / work per sample`` samples/s and the lowest binds (``labkit roofline``).
"""

from __future__ import annotations

import statistics
import tempfile
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from . import paths
from .data.fixtures import fixture
from .errors import LabkitError
from .images.decode import available_decoders, decode_jpeg
from .instruments.timer import best_of
from .optional import status
from .scale import knob, resolve_scale

MIB = 2 ** 20
TRIALS = 5   # timed trials after one untimed warm-up


@dataclass(frozen=True)
class Ceiling:
    """One ceiling: the median of ``trials`` (work per second, one process) or ``why`` not."""

    label: str
    unit: str
    how: str
    trials: tuple[float, ...] = ()
    why: str = ""

    @property
    def rate(self) -> float | None:
        return statistics.median(self.trials) if self.trials else None

    @property
    def lo(self) -> float | None:
        return min(self.trials, default=None)

    @property
    def hi(self) -> float | None:
        return max(self.trials, default=None)

    def __str__(self) -> str:
        if not self.trials:
            return f"{self.label:<24}missing: {self.why}"
        return (f"{self.label:<24}{_num(self.rate, self.unit):>20}  trials "
                f"{_num(self.lo, '')}-{_num(self.hi, '')}  {self.how}")

    def as_observations(self, name: str, config: dict | None = None) -> list[dict]:
        """``ceiling.NAME`` for ``Checkpoint.add``: the rate and its spread, or why not."""
        cfg = {"lo": self.lo, "hi": self.hi, "trials": len(self.trials), **(config or {})}
        return [{"name": f"ceiling.{name}", "value": self.rate if self.trials else "missing",
                 "unit": self.unit, "config": cfg, "note": self.how if self.trials else self.why}]


class _Missing(LabkitError):
    """This machine cannot measure a ceiling; the message says why."""


def _num(x: float, unit: str) -> str:
    """``5.1 GB/s``, ``340 Mpx/s``, ``1.2 k batches/s``."""
    gap = "" if unit in ("B/s", "px/s") else " "
    for div, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if x >= div:
            return f"{x / div:.3g} {prefix}{gap}{unit}".strip()
    return f"{x:.3g} {unit}".strip()


def _rates(work: float, fn, sync=None) -> tuple[float, ...]:
    """``work`` per second of each timed call of ``fn``."""
    return tuple(work / s for s in best_of(fn, repeats=TRIALS, warmup=1, sync=sync).trials_s)


def _page_cache_read(scale: str):
    n, buf = knob("ceiling_mib", scale) * MIB, bytearray(4 * MIB)
    folder = paths.data_dir()   # the data disk: /tmp may be memory
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=folder, suffix=".ceiling") as f:
        rng = np.random.default_rng(0)
        for _ in range(n // (16 * MIB)):
            f.write(rng.bytes(16 * MIB))
        f.flush()

        def read():
            with open(f.name, "rb", buffering=0) as g:
                while g.readinto(buf):
                    pass

        return _rates(n, read)   # the warm-up read leaves the whole file cached


def _memcpy(scale: str):
    src = np.ones(knob("ceiling_mib", scale) * MIB, np.uint8)
    dst = np.empty_like(src)
    return _rates(src.nbytes, lambda: np.copyto(dst, src))


class _Same(Dataset):
    """One small tensor per item: what is timed is the DataLoader's own cost per sample."""

    def __init__(self, n: int):
        self.n, self.item = n, torch.zeros(4)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.item


def _sample_fetch(scale: str):
    n = knob("ceiling_samples", scale)
    loader = DataLoader(_Same(n), batch_size=256)
    return _rates(n, lambda: [None for _ in loader])


class _Batches(_Same):
    """Each item a batch of two fresh small tensors, as a collated batch crosses from a worker."""

    def __getitem__(self, i: int):
        return torch.empty(64, dtype=torch.uint8), torch.empty(1, dtype=torch.int64)


def _handover(scale: str):
    n = knob("ceiling_batches", scale)
    loader = DataLoader(_Batches(n), batch_size=None, num_workers=1, prefetch_factor=4,
                        persistent_workers=True, timeout=60)
    return _rates(n, lambda: [None for _ in loader])   # its worker stops with the loader


def _jpeg_decode(scale: str):
    files = fixture("images", scale, progress=False).file_list(".jpg")
    blobs = [p.read_bytes() for p in files[:knob("ceiling_jpegs", scale)]]
    h, w, _ = decode_jpeg(blobs[0]).shape   # the fixture's images are all one size
    return max((_rates(h * w * len(blobs), lambda d=d: [decode_jpeg(b, d) for b in blobs])
                for d in available_decoders()), key=statistics.median)


def _h2d(scale: str):
    ok, why = status("cuda")
    if not ok:
        raise _Missing(why)
    t = torch.empty(knob("ceiling_mib", scale) * MIB, dtype=torch.uint8).pin_memory()
    return _rates(t.nbytes, lambda: t.to("cuda", non_blocking=True), sync="cuda")


_CEILINGS = {   # name: (label, unit, how it is measured, the measurement)
    "page_cache_read": ("page-cache read", "B/s",
                        "a cached file read into a buffer 4 MiB at a time, one core",
                        _page_cache_read),
    "memcpy": ("memcpy", "B/s", "np.copyto between two arrays of the read's size, one core",
               _memcpy),
    "sample_fetch": ("DataLoader fetch", "samples/s", "a 4-element tensor per item, sampler "
                     "and default_collate, batch 256, num_workers=0", _sample_fetch),
    "handover": ("hand-over of a batch", "batches/s", "one worker hands the main process "
                 "pre-made batches of two small tensors (the cost per batch)", _handover),
    "jpeg_decode": ("JPEG decode", "px/s", "the images fixture, the fastest installed "
                    "decoder (Pillow, simplejpeg or OpenCV), one core", _jpeg_decode),
    "h2d": ("host-to-device", "B/s", "pinned memory .to('cuda', non_blocking=True), "
            "synchronised", _h2d),
}


def measure_ceilings(names=None, scale: str | None = None) -> dict[str, Ceiling]:
    """Measure the ceilings ``names`` (default: all six) on this machine, now.

    Returns ``{name: Ceiling}`` (``rate``: the median trial, ``lo``, ``hi``, ``unit``, ``how``;
    or ``rate`` None and ``why``); an unknown name raises :class:`~labkit.LabkitError`.
    """
    scale = resolve_scale(scale)
    names = list(_CEILINGS) if names is None else list(names)
    unknown = [n for n in names if n not in _CEILINGS]
    if unknown:
        raise LabkitError(f"no ceiling named {', '.join(map(repr, unknown))}; the ceilings: "
                          f"{', '.join(_CEILINGS)}")
    out = {}
    for name in names:
        label, unit, how, measure = _CEILINGS[name]
        try:
            out[name] = Ceiling(label, unit, how, measure(scale))
        except _Missing as e:
            out[name] = Ceiling(label, unit, how, why=str(e))
        except Exception as e:  # noqa: BLE001 - one ceiling's failure must not hide the rest
            out[name] = Ceiling(label, unit, how,
                                why=f"measuring it failed: {type(e).__name__}: {e}"[:300])
    return out


__all__ = ["measure_ceilings"]
