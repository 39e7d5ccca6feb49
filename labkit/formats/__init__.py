"""Storage formats for random access: LMDB, HDF5, TFRecord, tensors on disk (chapter 12)."""
