"""TFRecord files: length-prefixed, CRC-checked records, and their index (chapter 12).

A TFRecord file is a sequence of records, each ``length (8 bytes, little-endian)``,
``masked crc32c of the length (4)``, ``data (length bytes)``, ``masked crc32c of the data
(4)``; the data here is a ``tf.train.Example`` protobuf. It is a stream: without an index
(offset and length of every record, what ``tfrecord``'s ``create_index`` writes) the only
way to record ``k`` is through records ``0..k-1``. :class:`TFRecordRows` uses the index for
random access and checks both CRCs of every record it reads (the ``tfrecord`` package's
reader does not check them).
"""

from __future__ import annotations

import struct
import time
from pathlib import Path

import numpy as np
import torch

from ..errors import DataFormatError
from .lazy import LazyFile

_MASK = 0xA282EAD8


def masked_crc(data) -> int:
    """TFRecord's masked crc32c of ``data`` (rotate right by 15, add a constant)."""
    import crc32c

    crc = crc32c.crc32c(data)
    return (((crc >> 15) | (crc << 17)) + _MASK) & 0xFFFFFFFF


def index_path(path) -> Path:
    """Where the index of a TFRecord file lives: ``x.tfrecord`` -> ``x.tfrecord.index``."""
    return Path(f"{path}.index")


def write_tfrecord(dest, rows: np.ndarray, *, index: bool = True) -> float:
    """Write ``rows`` as one ``tf.train.Example`` per row (``id``, ``row`` bytes, ``dtype``,
    ``shape``) with the ``tfrecord`` package, and its index unless ``index=False``.

    Returns the seconds taken (the index included).
    """
    from tfrecord import TFRecordWriter
    from tfrecord.tools.tfrecord2idx import create_index

    rows = np.asarray(rows)
    t0 = time.perf_counter()
    writer = TFRecordWriter(str(dest))
    try:
        for i in range(len(rows)):
            writer.write({"id": (i, "int"),
                          "row": (np.ascontiguousarray(rows[i]).tobytes(), "byte"),
                          "dtype": (rows.dtype.str.encode(), "byte"),
                          "shape": (list(rows.shape[1:]), "int")})
    finally:
        writer.close()
    if index:
        create_index(str(dest), str(index_path(dest)))
    return time.perf_counter() - t0


def read_record(f, path, k: int, offset: int | None = None) -> bytes | None:
    """Read and check one record at the file position (or ``offset``); None at the end.

    Raises :class:`~labkit.DataFormatError` naming the file, the record and the byte offset
    for a truncated record or a CRC that does not match.
    """
    if offset is not None:
        f.seek(offset)
    at = f.tell()
    head = f.read(12)
    if not head:
        return None
    if len(head) < 12:
        raise DataFormatError(f"{path}: record {k} at byte {at} is truncated (header "
                              f"{len(head)} of 12 bytes)")
    length, length_crc = struct.unpack("<QI", head)
    if masked_crc(head[:8]) != length_crc:
        raise DataFormatError(f"{path}: record {k} at byte {at}: length CRC mismatch "
                              "(corrupted header)")
    data = f.read(length)
    tail = f.read(4)
    if len(data) < length or len(tail) < 4:
        raise DataFormatError(f"{path}: record {k} at byte {at} is truncated ({len(data)} of "
                              f"{length} data bytes)")
    if masked_crc(data) != struct.unpack("<I", tail)[0]:
        raise DataFormatError(f"{path}: record {k} at byte {at}: data CRC mismatch "
                              "(corrupted record)")
    return data


def parse_row(data: bytes) -> tuple[int, np.ndarray]:
    """``(id, row)`` from one record written by :func:`write_tfrecord`."""
    from tfrecord import example_pb2

    ex = example_pb2.Example()
    ex.ParseFromString(data)
    feat = ex.features.feature
    dtype = np.dtype(feat["dtype"].bytes_list.value[0].decode())
    shape = tuple(feat["shape"].int64_list.value)
    row = np.frombuffer(feat["row"].bytes_list.value[0], dtype=dtype).reshape(shape)
    return int(feat["id"].int64_list.value[0]), row.copy()


def _load_index(path: Path, idx: Path) -> np.ndarray:
    try:
        table = np.loadtxt(idx, dtype=np.int64, ndmin=2)
    except FileNotFoundError:
        raise DataFormatError(f"{idx}: no index for {path}; write one with "
                              "tfrecord.tools.tfrecord2idx.create_index") from None
    except ValueError as e:
        raise DataFormatError(f"{idx}: not a TFRecord index ({e})") from None
    if table.size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    end = int(table[-1, 0] + table[-1, 1])
    size = path.stat().st_size
    if table.shape[1] != 2 or end != size:
        raise DataFormatError(f"{path}: {size} bytes, but its index {idx.name} says the "
                              f"records end at byte {end}; truncated, or a stale index")
    return table


class TFRecordRows(LazyFile):
    """Map-style rows of a TFRecord file through its index: ``dataset[i]`` is
    ``(row tensor, id)``. Every read checks both CRCs; the file opens lazily per process."""

    def __init__(self, path, index=None):
        super().__init__(path)
        self.index_file = Path(index) if index else index_path(self.path)
        self.index = _load_index(self.path, self.index_file)

    def open(self):
        return open(self.path, "rb")  # noqa: SIM115 (kept open for the process's reads)

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, i: int):
        if not 0 <= i < len(self.index):
            raise IndexError(i)
        data = read_record(self.handle, self.path, i, int(self.index[i, 0]))
        if data is None:
            raise DataFormatError(f"{self.path}: record {i} at byte {self.index[i, 0]} is "
                                  "past the end of the file")
        sample_id, row = parse_row(data)
        return torch.from_numpy(row), sample_id
