"""Token pipelines for language models (chapter 11): a tokenized corpus, window samplers,
document epochs with exact resume, packing, document masks, source mixing.

Modules here are imported by their full path; the public names are re-exported by
``labkit`` itself (``import labkit as lk``).
"""
