"""Streaming datasets split across ranks x workers: one split base, array shards, Parquet row
groups, tar shards (chapters 03-08).

Modules here are imported by their full path; the public names are re-exported by
``labkit`` itself (``import labkit as lk``).
"""
