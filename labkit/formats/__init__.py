"""Storage formats for random access: LMDB, HDF5, TFRecord, tensors on disk (chapter 12).

Importing the package registers ``labkit bench formats`` (:mod:`labkit.formats.bench`).
"""

from . import bench as _bench  # noqa: F401 (registers the benchmark)
