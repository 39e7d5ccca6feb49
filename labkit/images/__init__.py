"""JPEG images: decoders, datasets, augmentation, GPU paths, stage costs (chapters 10, 14).

Modules here are imported by their full path; the public names are re-exported by
``labkit`` itself (``import labkit as lk``).
"""
