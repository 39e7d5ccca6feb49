"""Packed images: every JPEG in one file plus an offset index, read through a memory map (ch. 16).

The smallest change of layout that removes the per-file cost: still map-style, so the
sampler, the shuffle and the workers work as before.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from ..data.fixtures import source_folder
from ..errors import DataFormatError
from .decode import DECODERS, decode_jpeg
from .folder import read_labels

_INDEX = "index.npy"   # (id, label, offset, length) per sample, int64
_BLOB = "images.bin"   # the JPEG bytes back to back
_META = "packed.json"  # what was packed, to tell a stale folder from a fresh one


# -- the packed format ----------------------------------------------------------------------

def pack_images(fixture_or_folder, dest) -> Path:
    """Pack an image folder (``labels.csv`` + JPEGs) into one blob and an offset index.

    Returns ``dest``. The samples keep the folder's order, ids and labels. Writing is
    atomic per file (temp name, then rename), so an interrupted pack is never read as whole.
    """
    folder = source_folder(fixture_or_folder)
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    rows = read_labels(folder)
    index = np.zeros((len(rows), 4), dtype=np.int64)
    tmp_blob = dest / f".{_BLOB}.{os.getpid()}.tmp"
    offset = 0
    with open(tmp_blob, "wb") as out:
        for k, (sample_id, label, rel) in enumerate(rows):
            try:
                data = (folder / rel).read_bytes()
            except OSError as e:
                tmp_blob.unlink(missing_ok=True)
                raise DataFormatError(f"{folder / rel}: cannot read sample {sample_id} "
                                      f"({e.strerror or e})") from None
            out.write(data)
            index[k] = (sample_id, label, offset, len(data))
            offset += len(data)
    tmp_index = dest / f".{_INDEX}.{os.getpid()}.tmp.npy"
    np.save(tmp_index, index)
    os.replace(tmp_blob, dest / _BLOB)
    os.replace(tmp_index, dest / _INDEX)
    (dest / _META).write_text(json.dumps({"source": str(folder), "samples": len(rows),
                                          "bytes": offset}))
    return dest


class PackedImages(Dataset):
    """The packed images as a map-style dataset: ``{"image", "label", "id"}`` (chapter 16).

    The same samples, in the same order, as :class:`~labkit.ImageFolderDataset` over the
    folder that was packed; one memory map instead of one open/read/close per sample.
    """

    def __init__(self, folder, decoder: str = "pil"):
        if decoder not in DECODERS:
            raise ValueError(f"decoder={decoder!r}: choose one of {', '.join(DECODERS)}")
        self.folder = Path(folder)
        self.decoder = decoder
        try:
            self.index = np.load(self.folder / _INDEX)
        except FileNotFoundError:
            raise DataFormatError(f"{self.folder / _INDEX}: not found; write the packed format "
                                  "first with lk.images.pack_images(images, folder)") from None
        if self.index.ndim != 2 or self.index.shape[1] != 4:
            raise DataFormatError(f"{self.folder / _INDEX}: expected shape (samples, 4), "
                                  f"found {self.index.shape}")
        blob = self.folder / _BLOB
        want = int(self.index[-1, 2] + self.index[-1, 3]) if len(self.index) else 0
        have = blob.stat().st_size if blob.exists() else -1
        if have != want:
            raise DataFormatError(f"{blob}: expected {want} bytes (from the index), "
                                  f"found {'no file' if have < 0 else f'{have} bytes'}")
        self._blob = None  # opened lazily: each worker maps it itself after the fork

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, i: int):
        if self._blob is None:
            self._blob = np.memmap(self.folder / _BLOB, dtype=np.uint8, mode="r")
        sample_id, label, offset, length = (int(v) for v in self.index[i])
        data = self._blob[offset:offset + length].tobytes()
        try:
            img = decode_jpeg(data, self.decoder)
        except Exception as e:  # each decoder fails its own way
            raise DataFormatError(f"{self.folder / _BLOB}: sample {sample_id} at byte "
                                  f"{offset} is not a decodable JPEG ({self.decoder}: "
                                  f"{type(e).__name__}: {e})") from None
        x = torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1)))
        return {"image": x, "label": label, "id": sample_id}

    def __getstate__(self):  # the map is not pickled: a worker opens its own
        state = dict(self.__dict__)
        state["_blob"] = None
        return state

