"""Storage formats for random access: LMDB, HDF5, TFRecord, tensors on disk (chapter 12).

``labkit bench formats`` lives with the other benchmarks (``labkit.tools.benchmarks``).
"""

