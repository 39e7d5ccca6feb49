"""Remote data on loopback: an HTTP server with faults, and torchrun jobs launched from a
notebook (chapters 04, 07).

Modules here are imported by their full path; the public names are re-exported by
``labkit`` itself (``import labkit as lk``).
"""
