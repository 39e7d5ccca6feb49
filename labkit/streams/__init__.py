"""Streams split across ranks x workers: one split base, arrays, row groups, tars (ch. 03-08).

Modules here are imported by their full path; the public names are re-exported by
``labkit`` itself (``import labkit as lk``).
"""
