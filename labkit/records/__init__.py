"""Records: the checkpoint, the machine, reports, the decision table, labkit run (ch. 00, 11).

Modules here are imported by their full path; the public names are re-exported by
``labkit`` itself (``import labkit as lk``).
"""
