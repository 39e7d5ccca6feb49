"""Loaders and prefetchers: DataLoaders that cannot hang, prefetch, processes (ch. 01, 09).

Modules here are imported by their full path; the public names are re-exported by
``labkit`` itself (``import labkit as lk``).
"""
