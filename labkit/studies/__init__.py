"""Studies that combine the instruments: resume trials, tuning, the capstone, the bake-off,
named benchmarks (chapters 08-11).

Modules here are imported by their full path; the public names are re-exported by
``labkit`` itself (``import labkit as lk``).
"""
