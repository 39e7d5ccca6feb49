"""Per-sample tensors on disk with ``torch.save``, read back with ``torch.load`` (chapters 12, 12b).

The "preprocess once, save tensors" layout: no decoding at load time, but one file (and
one open, one unpickle with ``weights_only=True``) per sample, like a folder of JPEGs.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from ..data.fixtures import source_files
from ..errors import DataFormatError


def write_tensor_files(dest, rows: np.ndarray) -> float:
    """``torch.save`` each row as ``dest/{i:07d}.pt``; returns the seconds taken."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    for i in range(len(rows)):
        # clone: a tensor viewing a big array would save the whole storage behind it
        torch.save(torch.from_numpy(np.array(rows[i])).clone(), dest / f"{i:07d}.pt")
    return time.perf_counter() - t0


class TensorFiles(Dataset):
    """Map-style: ``dataset[i]`` is ``(torch.load(file i), i)``, the files sorted by name."""

    def __init__(self, folder):
        self.folder = Path(folder)
        self.files = source_files(self.folder, ".pt")

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int):
        path = self.files[i]
        try:
            return torch.load(path, weights_only=True), i
        except FileNotFoundError:
            raise DataFormatError(f"{path}: sample {i} is missing") from None
        except (RuntimeError, EOFError, OSError) as e:
            raise DataFormatError(f"{path}: sample {i} is not a readable tensor file "
                                  f"({type(e).__name__}: {e})") from None
