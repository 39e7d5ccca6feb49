"""Instruments: meter, measurement, audits, memory, page cache, shuffle quality (ch. 01-08).

Modules here are imported by their full path; the public names are re-exported by
``labkit`` itself (``import labkit as lk``).
"""
