"""The bake-off's Ray Data, MosaicML Streaming and LitData rows (chapters 14, 16).

Each reads the bake-off's images in its own format from local disk, decoding with the same
decoder as every other row (chapter 16); chapter 14 runs the same systems against the
loopback bucket (``objstore/systems.py``). Each row's ``close`` (the runner calls it)
releases what the system holds beyond its workers: Ray's processes, Mosaic's shared memory.
"""

from __future__ import annotations

import numpy as np
from torch.utils.data import DataLoader

from ...images.decode import decode_jpeg
from ...objstore.leftovers import MosaicShm, start_ray
from ...objstore.systems import import_streaming
from .data import ensure_format
from .datasets import _DecodeCollate, _DecodeItem

# TODO(merge): from ...loading.loaders import WORKER_TIMEOUT_S (the lead's change adds it).
WORKER_TIMEOUT_S = 60.0  # seconds a worker may take per batch (only with workers: torch)


class _RayBatches:
    """Re-iterable over a Ray dataset: each pass is one ``iter_torch_batches``."""

    def __init__(self, ds, batch_size, started_ray: bool):
        self.ds, self.batch_size, self.started_ray = ds, batch_size, started_ray

    def __iter__(self):
        for b in self.ds.iter_torch_batches(batch_size=self.batch_size):
            yield {"image": b["image"], "label": b["label"], "id": b["id"]}

    def close(self) -> None:
        """Stop the Ray processes this adapter started (the bake-off's runner calls it)."""
        if self.started_ray:
            import ray

            ray.shutdown()
            self.started_ray = False


def _ray_data(data, batch_size, num_workers, decoder):
    import ray


    started = not ray.is_initialized()
    if started:
        start_ray(ray, max(1, num_workers))
    ray.data.DataContext.get_current().enable_progress_bars = False

    def decode(batch):
        imgs = [decode_jpeg(bytes(j), decoder).transpose(2, 0, 1) for j in batch["jpg"]]
        return {"image": np.stack(imgs), "label": batch["label"].astype(np.int64),
                "id": batch["id"].astype(np.int64)}

    files = [str(p) for p in ensure_format(data, "parquet")]
    ds = ray.data.read_parquet(files).map_batches(decode, batch_format="numpy")
    return _RayBatches(ds, batch_size, started)


def _import_streaming(mod: str):
    """MosaicML's import, past its torchvision import (chapter 14's one workaround)."""
    return import_streaming()


def _mosaic_streaming(data, batch_size, num_workers, decoder):
    StreamingDataset = import_streaming().StreamingDataset  # noqa: N806 - a class

    folder = ensure_format(data, "mds")
    shm = MosaicShm()
    # a StreamingDataset is iterated (it splits samples over ranks and workers itself);
    # decoding happens in the collate, which runs in the workers
    ds = shm.track(StreamingDataset(local=str(folder), shuffle=False, batch_size=batch_size))
    loader = DataLoader(ds, batch_size=batch_size, num_workers=num_workers,
                        collate_fn=_DecodeCollate(decoder),
                        timeout=WORKER_TIMEOUT_S if num_workers else 0)
    return _MosaicBatches(loader, shm)


class _MosaicBatches:
    """Mosaic's loader, re-iterable; ``close`` (the bake-off's runner calls it) drops the
    DataLoader (the last reference: torch stops any workers it still has) and removes the
    shared memory its dataset made."""

    def __init__(self, loader, shm):
        self.loader, self.shm = loader, shm

    def __iter__(self):
        return iter(self.loader)

    def close(self) -> None:
        self.loader = None
        self.shm.release()


def _litdata(data, batch_size, num_workers, decoder):
    import litdata

    folder = ensure_format(data, "litdata")
    # StreamingDataLoader takes only litdata's own datasets: decode through its transform
    ds = litdata.StreamingDataset(input_dir=str(folder), shuffle=False,
                                  transform=_DecodeItem(decoder))
    return litdata.StreamingDataLoader(ds, batch_size=batch_size, num_workers=num_workers,
                                       timeout=WORKER_TIMEOUT_S if num_workers else 0)
