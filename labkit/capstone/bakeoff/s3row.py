"""The bake-off's WebDataset rows: tar shards on disk and in the loopback S3 store (ch. 14, 16)."""

from __future__ import annotations

import os
import weakref
from functools import partial

from torch.utils.data import default_collate

from ...objstore.store import s3_store
from .data import ensure_format
from .datasets import _sample

#: First-byte latency of the bake-off's object store: chapter 14's ci and workshop setting.
S3_LATENCY_S = 0.02
# TODO(merge): from ...loading.loaders import WORKER_TIMEOUT_S (the lead's change adds it).
WORKER_TIMEOUT_S = 60.0  # seconds a worker may take per batch (only with workers: torch)


class _StoreBatches:
    """A loader over the loopback S3 store, which lives as long as this object or its
    iterators: :meth:`close` (the runner calls it), garbage collection or the interpreter's
    exit stops it, so no server process outlives the row."""

    def __init__(self, store, loader):
        self.loader = loader
        self._stop = weakref.finalize(self, _stop_store, store, os.getpid())

    def __iter__(self):  # a generator: it keeps self (and so the store) alive while it runs
        it = iter(self.loader)
        try:
            yield from it
        finally:
            del it  # the last reference to the iterator: its workers stop now

    def close(self) -> None:
        self._stop()


def _stop_store(store, owner: int) -> None:
    if os.getpid() == owner:  # never from a forked worker's copy
        store.stop()


def _decode_wds_sample(sample, decoder):
    return _sample(int(sample["id"]), int(sample["cls"]), sample["jpg"], decoder)


def webdataset_tar(data, batch_size, num_workers, decoder, urls=None):
    """WebDataset + WebLoader over the tar shards: on disk, or at ``urls`` (the S3 row)."""
    import webdataset as wds

    decode = partial(_decode_wds_sample, decoder=decoder)  # picklable: spawn workers
    urls = urls or [str(p) for p in ensure_format(data, "tar")]
    # split_by_worker is WebDataset's default; nodesplitter for ranks. No shard shuffle: the
    # same order as every other adapter (the bake-off measures loading, not shuffling).
    ds = (wds.WebDataset(urls, shardshuffle=False, empty_check=False,
                         nodesplitter=wds.split_by_node)
          .map(decode).batched(batch_size, collation_fn=default_collate, partial=True))
    return wds.WebLoader(ds, batch_size=None, num_workers=num_workers,
                         timeout=WORKER_TIMEOUT_S if num_workers else 0)


def webdataset_s3(data, batch_size, num_workers, decoder):
    """The same tar shards in a bucket of the loopback S3 store (chapter 14), 20 ms before
    every first byte, read by WebDataset over presigned GET URLs: webdataset's own http
    opener (curl), no credentials in the workers, the way shards are shared from S3."""
    import shutil


    if shutil.which("curl") is None:
        raise RuntimeError("webdataset opens http(s) URLs with curl, which is not installed "
                           "(apt-get install curl)")
    store = s3_store(latency_s=S3_LATENCY_S)
    try:
        keys = store.put_files("bakeoff", ensure_format(data, "tar"))
        s3 = store.client()
        urls = [s3.generate_presigned_url("get_object", Params={"Bucket": "bakeoff", "Key": k},
                                          ExpiresIn=3600) for k in keys]
        return _StoreBatches(store, webdataset_tar(data, batch_size, num_workers, decoder, urls))
    except BaseException:
        store.stop()
        raise
