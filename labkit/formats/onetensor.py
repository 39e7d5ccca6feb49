"""One tensor file for a dataset, a row at a time: torch.load(mmap=True), safetensors (chapter 12b).

``torch.save`` of one big tensor, loaded with ``torch.load(path, mmap=True)``, gives back a
tensor whose storage is the file, memory-mapped: ``t[i]`` touches only row ``i``'s pages.
safetensors is a JSON header (names, dtypes, shapes, byte offsets) followed by raw bytes;
``safe_open(...).get_slice(name)[i]`` reads one row. Both are opened lazily, per process
(:class:`~labkit.formats.lazy.LazyFile`), and pickle as their path.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch

from ..errors import DataFormatError
from ..optional import check, library_status
from .lazy import RowFile

#: The tensor's name inside a safetensors file written here.
TENSOR = "rows"


@check("safetensors")
def _safetensors_status() -> tuple[bool, str]:
    """``(True, version)`` when the optional ``safetensors`` package imports, else why not."""
    return library_status("safetensors", install="pip install safetensors")


def write_torch_tensor(dest, rows: np.ndarray) -> float:
    """``torch.save`` all ``rows`` as one tensor in ``dest``; returns the seconds taken."""
    t0 = time.perf_counter()
    torch.save(torch.from_numpy(np.ascontiguousarray(rows)), Path(dest))
    return time.perf_counter() - t0


def write_safetensors(dest, rows: np.ndarray) -> float:
    """Save all ``rows`` as the tensor ``rows`` of a safetensors file; returns the seconds."""
    from safetensors.torch import save_file

    t0 = time.perf_counter()
    save_file({TENSOR: torch.from_numpy(np.ascontiguousarray(rows))}, str(dest))
    return time.perf_counter() - t0


class TorchMmapRows(RowFile):
    """Map-style rows of one ``torch.save``d tensor, ``torch.load(mmap=True)`` per process."""

    def __init__(self, path):
        super().__init__(path)
        self.samples = len(self.open())  # a memory map: only the header is read here

    def open(self):
        try:
            return torch.load(self.path, mmap=True, weights_only=True)
        except (RuntimeError, EOFError, OSError) as e:
            raise DataFormatError(f"{self.path}: not a readable tensor file "
                                  f"({type(e).__name__}: {e})") from None

    def row(self, i: int):
        return self.handle[i].clone()  # clone: the batch must not keep the map alive


class SafetensorsRows(RowFile):
    """Map-style rows of one safetensors tensor, ``safe_open`` per process, a slice a row."""

    def __init__(self, path, name: str = TENSOR):
        super().__init__(path)
        self.name = name
        self.samples = self._slice(self.open()).get_shape()[0]

    def open(self):
        from safetensors import safe_open

        try:
            return safe_open(str(self.path), framework="pt")
        except Exception as e:  # safetensors raises its own SafetensorError
            raise DataFormatError(f"{self.path}: not a readable safetensors file "
                                  f"({type(e).__name__}: {e})") from None

    def _slice(self, handle):
        if self.name not in handle.keys():
            raise DataFormatError(f"{self.path}: no tensor {self.name!r} "
                                  f"(tensors: {sorted(handle.keys())})")
        return handle.get_slice(self.name)

    def row(self, i: int):
        return self._slice(self.handle)[i]
