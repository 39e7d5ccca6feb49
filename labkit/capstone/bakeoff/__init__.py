"""The cross-library bake-off: one fixture, one train step, every loader installed (ch. 16).

Every adapter reads the same JPEGs (the ``images`` fixture, converted at run time to the
format its library wants: tar shards, Parquet, MDS, LitData chunks, LMDB, HDF5; conversion is
timed on its own, never inside a loader's throughput), decodes them with the same decoder and yields
the same batches: ``{"image": uint8 NCHW, "label": int64, "id": int64}``. :func:`run_bakeoff`
measures each with the meter and the same train step, audits that every id came exactly
once, and reports a ratio against torch's map-style DataLoader measured in the same run.

A library that is not installed (or cannot run here: DALI needs CUDA) is skipped with the
reason and the command that installs it; :func:`probe_loader` says which.

Modules: ``data`` (the one fixture written in every format), ``datasets`` (the by-hand
streams and picklable decoders the adapters share), ``adapters`` (one per library, probed),
``runner`` (measure each, audit it, ratio against the baseline).
"""
