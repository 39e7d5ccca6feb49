"""Records: the verification checkpoint, the machine it ran on, reports across runs, the
decision table, `labkit run` (chapters 00, 11).

Modules here are imported by their full path; the public names are re-exported by
``labkit`` itself (``import labkit as lk``).
"""
