"""The bake-off's object-store row: WebDataset over the loopback S3 store (chapters 14, 16)."""

from __future__ import annotations

import os
import weakref

from .data import ensure_format

#: First-byte latency of the bake-off's object store: chapter 14's ci and workshop setting.
S3_LATENCY_S = 0.02


class _StoreBatches:
    """A loader over the loopback S3 store, which lives as long as this object or its
    iterators: :meth:`close` (the runner's ``shutdown``), garbage collection or the
    interpreter's exit stops it, so no server process outlives the row."""

    def __init__(self, store, loader):
        self.loader = loader
        self._stop = weakref.finalize(self, _stop_store, store, os.getpid())

    def __iter__(self):  # a generator: it keeps self (and so the store) alive while it runs
        from ...loading.loaders import shutdown

        it = iter(self.loader)
        try:
            yield from it
        finally:
            shutdown(it)

    def close(self) -> None:
        self._stop()


def _stop_store(store, owner: int) -> None:
    if os.getpid() == owner:  # never from a forked worker's copy
        store.stop()


def webdataset_s3(data, batch_size, num_workers, decoder):
    """The same tar shards in a bucket of the loopback S3 store (chapter 14), 20 ms before
    every first byte, read by WebDataset over presigned GET URLs: webdataset's own http
    opener (curl), no credentials in the workers, the way shards are shared from S3."""
    import shutil

    from ...objstore.store import s3_store
    from .adapters import _webdataset

    if shutil.which("curl") is None:
        raise RuntimeError("webdataset opens http(s) URLs with curl, which is not installed "
                           "(apt-get install curl)")
    store = s3_store(latency_s=S3_LATENCY_S)
    try:
        keys = store.put_files("bakeoff", ensure_format(data, "tar"))
        s3 = store.client()
        urls = [s3.generate_presigned_url("get_object", Params={"Bucket": "bakeoff", "Key": k},
                                          ExpiresIn=3600) for k in keys]
        return _StoreBatches(store, _webdataset(data, batch_size, num_workers, decoder, urls))
    except BaseException:
        store.stop()
        raise
