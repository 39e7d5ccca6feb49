"""Studies that combine the instruments: resume, tuning, capstone, bake-off (chapters 07-11).

Modules here are imported by their full path; the public names are re-exported by
``labkit`` itself (``import labkit as lk``).
"""
