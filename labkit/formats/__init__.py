"""Storage formats for random access: LMDB, HDF5, TFRecord, tensors on disk (chapter 12).

``labkit bench formats`` lives with the other benchmarks (``labkit.tools.benchmarks``).
"""

from __future__ import annotations

from .ahead import ResizeTo, break_even, raw_ahead, resize_ahead
from .breakeven import BreakEven
from .hdf5rows import Hdf5Rows, write_hdf5
from .lazy import LazyFile
from .lmdbrows import LmdbRows, write_lmdb
from .moreformats import ArrayRecordRows, LanceRows
from .onetensor import SafetensorsRows, TorchMmapRows
from .table import (
    format_formats,
    measure_formats,
    read_back,
    write_formats,
    write_more_formats,
    write_tensor_formats,
)
from .tfdata import tfdata_measure
from .tfrecords import TFRecordRows
from .trap import trap_trial
from .widget import BreakEvenWidget

__all__ = [
    "ArrayRecordRows",
    "BreakEven",
    "BreakEvenWidget",
    "Hdf5Rows",
    "LanceRows",
    "LazyFile",
    "LmdbRows",
    "ResizeTo",
    "SafetensorsRows",
    "TFRecordRows",
    "TorchMmapRows",
    "break_even",
    "format_formats",
    "measure_formats",
    "raw_ahead",
    "read_back",
    "resize_ahead",
    "tfdata_measure",
    "trap_trial",
    "write_formats",
    "write_hdf5",
    "write_lmdb",
    "write_more_formats",
    "write_tensor_formats",
]
