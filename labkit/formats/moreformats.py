"""Two more random-access formats, optional: Lance and ArrayRecord (chapter 12b).

**Lance** (``pylance``) is a columnar format built for random access: a dataset is a folder of
data files plus versioned manifests, and ``dataset.take(indices)`` reads rows by position.
**ArrayRecord** (Google's, what Grain reads) is a file of records in chunks with an index
at the end; written with ``group_size:1`` every record is its own chunk, so record ``k`` is
one seek. Both are the optional ``moreformats`` extra: ``lk.status("lance")`` and
``lk.status("array_record")`` say whether the library imports and, if not, how to install
it, and the libraries are imported inside the functions that use them so the rest of the
chapter runs without them. Both readers open
lazily, per process (:class:`~labkit.formats.lazy.LazyFile`), and pickle as their path.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from ..errors import DataFormatError
from ..optional import check, library_status
from .lazy import RowFile

_EXTRA = 'pip install -e ".[moreformats]"'


@check("lance")
def _lance_status() -> tuple[bool, str]:
    """``(True, version)`` when ``lance`` (the ``pylance`` package) is installed, else why not.

    Found, not imported: importing lance starts its runtime's threads, and every ``fork()``
    after that warns that lance is not fork-safe (its forked workers crashed here), so a
    process that only asks must not import it.
    """
    return library_status("pylance", "lance", label="pylance", load=False,
                          install=f"{_EXTRA} or pip install pylance")


@check("array_record")
def _array_record_status() -> tuple[bool, str]:
    """``(True, version)`` when ``array_record``'s reader and writer load, else why not."""
    return library_status("array-record", "array_record.python.array_record_module",
                          install=f"{_EXTRA} or pip install array-record")


def write_lance(dest, rows: np.ndarray) -> float:
    """Write ``rows`` (samples x features) as a Lance dataset in the folder ``dest``: an
    ``id`` column and a ``row`` column of fixed-size lists. Returns the seconds taken."""
    import lance  # optional (moreformats extra)
    import pyarrow as pa

    rows = np.ascontiguousarray(rows)
    t0 = time.perf_counter()
    table = pa.table({"id": pa.array(np.arange(len(rows))),
                      "row": pa.FixedSizeListArray.from_arrays(pa.array(rows.reshape(-1)),
                                                               rows.shape[1])})
    lance.write_dataset(table, str(dest))
    return time.perf_counter() - t0


def write_array_record(dest, rows: np.ndarray) -> float:
    """Write each row's bytes as one ArrayRecord record (``group_size:1``: a record per chunk,
    what random access wants). Returns the seconds taken."""
    from array_record.python.array_record_module import ArrayRecordWriter  # optional

    rows = np.ascontiguousarray(rows)
    t0 = time.perf_counter()
    writer = ArrayRecordWriter(str(dest), "group_size:1")
    try:
        for r in rows:
            writer.write(r.tobytes())
    finally:
        writer.close()
    return time.perf_counter() - t0


class LanceRows(RowFile):
    """Map-style rows of a Lance dataset, ``lance.dataset`` per process, ``take([i])`` a row."""

    def __init__(self, path, column: str = "row"):
        super().__init__(path)
        self.column = column
        ds = self.open()
        if column not in ds.schema.names:
            raise DataFormatError(f"{self.path}: no column {column!r} (columns: "
                                  f"{ds.schema.names})")
        self.samples = ds.count_rows()

    def open(self):
        import lance  # optional (moreformats extra)

        try:
            return lance.dataset(str(self.path))
        except (ValueError, OSError) as e:  # lance reports a bad dataset as ValueError
            raise DataFormatError(f"{self.path}: not a readable Lance dataset "
                                  f"({type(e).__name__}: {e})") from None

    def row(self, i: int):
        col = self.handle.take([i], columns=[self.column]).column(0).combine_chunks()
        return torch.from_numpy(col.flatten().to_numpy(zero_copy_only=False).copy())


class ArrayRecordRows(RowFile):
    """Map-style rows of an ArrayRecord file of raw row bytes, one reader per process.

    The records are bytes only, so ``dtype`` says what they hold (the rows written by
    :func:`write_array_record`). The reader options are Grain's for random access
    (``ArrayRecordDataSource``): no read-ahead.
    """

    def __init__(self, path, dtype=np.float32):
        super().__init__(path)
        self.dtype = np.dtype(dtype)
        self.samples = self.open().num_records()

    def open(self):
        from array_record.python.array_record_module import ArrayRecordReader  # optional

        reader = ArrayRecordReader(str(self.path), "readahead_buffer_size:0",
                                   file_reader_buffer_size=32768)
        if not reader.ok():  # a damaged file raises nothing: the reader reports 0 records
            raise DataFormatError(f"{self.path}: not a readable ArrayRecord file (cut short "
                                  "or not ArrayRecord: its footer and index do not parse)")
        return reader

    def row(self, i: int):
        (raw,) = self.handle.read([i])
        return torch.from_numpy(np.frombuffer(raw, dtype=self.dtype).copy())

