"""Loaders and prefetchers: DataLoaders that cannot hang, batches sized, thread and CUDA-stream
prefetch (chapters 01, 09).

Modules here are imported by their full path; the public names are re-exported by
``labkit`` itself (``import labkit as lk``).
"""
