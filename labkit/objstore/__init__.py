"""Object stores (chapter 14): whether MosaicML Streaming, LitData and Ray Data may run here.

The loopback S3 store is ``lk.remote.serve(s3=True)`` (:mod:`labkit.remote.stores`); the
stream over it, the shard-size model and the systems' runs are typed in chapters 14 and 14b.
``systems`` registers their ``lk.status`` checks.
"""
