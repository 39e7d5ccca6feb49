"""Remote data on loopback: an HTTP server with faults, torchrun jobs (chapters 04, 06, 07).

Modules here are imported by their full path; the public names are re-exported by
``labkit`` itself (``import labkit as lk``).
"""
