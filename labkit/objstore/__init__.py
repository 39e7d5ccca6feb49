"""Object stores (chapter 14): the loopback S3 store, its fault layer, shards in a bucket, systems.

A chapter folder: it imports the spine, never the tools. The public names are re-exported by
``labkit`` itself (``import labkit as lk``).
"""
