"""Preprocessing ahead: resize JPEGs once, or store raw uint8 pixels; when it pays (chapter 12c).

Three ways to hand the model ``size x size`` images: decode the original JPEGs and resize
every epoch, decode JPEGs resized ahead of time, or read raw uint8 pixels (no decode, many
more bytes). Which is fastest depends on the CPU's decode rate and the disk's bandwidth:
:func:`read_decode_rate` models one reading process (read the bytes, then decode),
:func:`break_even` finds the bandwidth where two choices meet, :func:`draw_break_even`
draws them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ..data.fixtures import source_folder
from ..data.writers import encode_jpeg
from ..images.decode import decode_jpeg
from ..images.folder import read_labels


def _resize(img: np.ndarray, size: int) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.fromarray(img).resize((size, size), Image.BILINEAR))


class ResizeTo:
    """A picklable transform: HxWx3 uint8 -> resized, as a CHW uint8 tensor."""

    def __init__(self, size: int):
        self.size = int(size)

    def __call__(self, img: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(_resize(img, self.size).transpose(2, 0, 1)))


def resize_ahead(fixture_or_folder, dest, size: int, quality: int = 90) -> Path:
    """Decode every JPEG once, resize to ``size``, encode again: an image folder at ``dest``
    (same ``labels.csv`` layout, so :class:`~labkit.ImageFolderDataset` reads it)."""
    folder, dest = source_folder(fixture_or_folder), Path(dest)
    (dest / "images").mkdir(parents=True, exist_ok=True)
    lines = ["id,label,file"]
    for sample_id, label, rel in read_labels(folder):
        img = decode_jpeg((folder / rel).read_bytes())
        (dest / rel).write_bytes(encode_jpeg(_resize(img, size), quality))
        lines.append(f"{sample_id},{label},{rel}")
    (dest / "labels.csv").write_text("\n".join(lines) + "\n")
    return dest


def raw_ahead(fixture_or_folder, dest, size: int) -> Path:
    """Decode and resize every JPEG once into one ``(samples, 3, size, size)`` uint8 ``.npy``
    (read back with :class:`~labkit.MemmapRows`)."""
    folder, dest = source_folder(fixture_or_folder), Path(dest)
    rows = read_labels(folder)
    out = np.lib.format.open_memmap(dest, mode="w+", dtype=np.uint8,
                                    shape=(len(rows), 3, size, size))
    for k, (_, _, rel) in enumerate(rows):
        out[k] = _resize(decode_jpeg((folder / rel).read_bytes()), size).transpose(2, 0, 1)
    out.flush()
    del out
    return dest


def read_decode_rate(cpu_samples_per_s, bytes_per_sample, disk_bytes_per_s):
    """Samples/s of one process that reads a sample at ``disk_bytes_per_s`` then spends
    ``1 / cpu_samples_per_s`` on it: ``1 / (1/cpu + bytes/bandwidth)``."""
    return 1.0 / (1.0 / cpu_samples_per_s + bytes_per_sample / np.asarray(disk_bytes_per_s))


def break_even(a: tuple[float, float], b: tuple[float, float]) -> float | None:
    """Disk bandwidth (B/s) where choices ``a`` and ``b``, each ``(cpu samples/s, bytes per
    sample)``, deliver the same samples/s; None if one wins at every bandwidth."""
    (ca, ba), (cb, bb) = a, b
    dcpu = 1.0 / ca - 1.0 / cb
    if dcpu == 0 or (bb - ba) / dcpu <= 0:
        return None
    return (bb - ba) / dcpu


def draw_break_even(ax, choices: dict[str, tuple[float, float]], *, disk_bytes_per_s=None,
                    disk_label: str = "measured here", title: str | None = None) -> None:
    """Draw samples/s against disk bandwidth for each choice ``name -> (cpu samples/s,
    bytes per sample)`` on ``ax``; a vertical line marks ``disk_bytes_per_s``."""
    bw = np.logspace(6, 10.5, 200)
    for name, (cpu, nbytes) in choices.items():
        ax.plot(bw / 1e6, read_decode_rate(cpu, nbytes, bw),
                label=f"{name} ({nbytes / 1024:.1f} KiB/sample)")
    if disk_bytes_per_s:
        ax.axvline(disk_bytes_per_s / 1e6, color="gray", ls="--",
                   label=f"{disk_label}: {disk_bytes_per_s / 1e6:,.0f} MB/s")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("disk bandwidth, MB/s (one reader)")
    ax.set_ylabel("samples/s, one process")
    ax.legend(fontsize=8)
    ax.set_title(title or "preprocessing ahead: decode cost vs bytes read")
