"""The images fixture as a map-style dataset; a collate skipping broken samples (ch. 10, 12, 16)."""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset, default_collate

from ..data.fixtures import source_folder
from ..errors import DataFormatError
from .decode import DECODERS, decode_jpeg


def read_labels(folder: Path) -> list[tuple[int, int, str]]:
    """``(id, label, relative file)`` rows of ``folder/labels.csv``, checked."""
    path = folder / "labels.csv"
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except FileNotFoundError:
        raise DataFormatError(f"{path}: not found; an image folder needs labels.csv "
                              "(id,label,file)") from None
    if not rows or set(rows[0]) != {"id", "label", "file"}:
        cols = sorted(rows[0]) if rows else []
        raise DataFormatError(f"{path}: expected columns id,label,file, found {cols}")
    return [(int(r["id"]), int(r["label"]), r["file"]) for r in rows]


class ImageFolderDataset(Dataset):
    """The ``images`` fixture (or a folder with ``labels.csv``) as a map-style dataset of
    ``{"image", "label", "id"}`` (ch. 10); ``transform`` takes the decoded HxWx3 uint8 array
    (default: a CHW tensor). A file that cannot be read or decoded raises
    :class:`~labkit.DataFormatError` naming it, or with ``on_error="skip"`` comes back as
    ``None`` for :func:`skip_collate` (this process's skipped ids: :attr:`skipped`)."""

    def __init__(self, fixture_or_folder, decoder: str = "pil",
                 transform: Callable | None = None, on_error: str = "raise"):
        if decoder not in DECODERS:
            raise ValueError(f"decoder={decoder!r}: choose one of {', '.join(DECODERS)}")
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', not {on_error!r}")
        self.folder = source_folder(fixture_or_folder)
        self.rows = read_labels(self.folder)
        self.decoder, self.transform, self.on_error = decoder, transform, on_error
        self.skipped: list[int] = []

    def __len__(self) -> int:
        return len(self.rows)

    def path(self, i: int) -> Path:
        return self.folder / self.rows[i][2]

    def read(self, i: int) -> bytes:
        """The file's bytes (the read stage, on its own for the stage breakdown)."""
        try:
            return self.path(i).read_bytes()
        except OSError as e:
            raise DataFormatError(f"{self.path(i)}: cannot read sample {self.rows[i][0]} "
                                  f"({e})") from None

    def decode(self, i: int, data: bytes) -> np.ndarray:  # a failure names the file
        try:
            return decode_jpeg(data, self.decoder)
        except Exception as e:  # each decoder fails its own way: OSError, ValueError, ...
            raise DataFormatError(
                f"{self.path(i)}: sample {self.rows[i][0]} is not a decodable JPEG "
                f"({self.decoder}: {type(e).__name__}: {e})") from None

    def __getitem__(self, i: int):
        sample_id, label, _ = self.rows[i]
        try:
            img = self.decode(i, self.read(i))
        except DataFormatError:
            if self.on_error == "raise":
                raise
            self.skipped.append(sample_id)
            return None
        x = self.transform(img) if self.transform else torch.from_numpy(
            np.ascontiguousarray(img.transpose(2, 0, 1)))
        return {"image": x, "label": label, "id": sample_id}


def skip_collate(samples: list):
    """Collate, dropping ``None`` samples and counting them in ``batch["skipped"]`` (a worker
    tells the main process only through the batch); none kept: ``{"skipped": n}``."""
    kept = [s for s in samples if s is not None]
    skipped = len(samples) - len(kept)
    if not kept:
        return {"skipped": skipped}
    batch = default_collate(kept)
    batch["skipped"] = skipped
    return batch
