"""Data the kit makes, and the teaching datasets over it (chapters 00-05).

Modules here are imported by their full path; the public names are re-exported by
``labkit`` itself (``import labkit as lk``).
"""
