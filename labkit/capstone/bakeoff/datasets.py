"""The bake-off's shared datasets: by-hand streams and picklable decoders (chapter 16)."""

from __future__ import annotations

import struct
import tarfile

import numpy as np
import torch
from torch.utils.data import Dataset, default_collate

from ...images.decode import decode_jpeg
from ...streams.split import SplitStream

# -- the datasets the adapters share (module level: workers must unpickle them) -------------

def _sample(sample_id: int, label: int, jpg: bytes, decoder: str) -> dict:
    img = decode_jpeg(jpg, decoder)
    return {"image": torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1))),
            "label": int(label), "id": int(sample_id)}


class TarImageStream(SplitStream):
    """By hand: tar shards streamed with ``tarfile``, shards split over rank x worker."""

    def __init__(self, shards, decoder: str = "pil"):
        super().__init__()
        self.shards = [str(s) for s in shards]
        self.decoder = decoder

    def __iter__(self):
        for s in self.share(len(self.shards)):
            members: dict[str, dict] = {}
            with tarfile.open(self.shards[s], "r|") as tar:  # streaming: no seeks
                for info in tar:
                    key, _, ext = info.name.rpartition(".")
                    members.setdefault(key, {})[ext] = tar.extractfile(info).read()
                    m = members[key]
                    if len(m) == 3:
                        del members[key]
                        yield _sample(int(m["id"]), int(m["cls"]), m["jpg"], self.decoder)


class ArrowImageBatches(SplitStream):
    """Parquet row groups read with pyarrow, split over rank x worker, yielded as batches."""

    def __init__(self, files, batch_size: int, decoder: str = "pil"):
        import pyarrow.parquet as pq

        super().__init__()
        self.files = [str(f) for f in files]
        self.units = [(f, g) for f, path in enumerate(self.files)
                      for g in range(pq.ParquetFile(path).metadata.num_row_groups)]
        self.batch_size, self.decoder = int(batch_size), decoder

    def __iter__(self):
        import pyarrow.parquet as pq

        opened: dict[int, object] = {}
        buf: list[dict] = []
        for u in self.share(len(self.units)):
            f, g = self.units[u]
            if f not in opened:
                opened[f] = pq.ParquetFile(self.files[f])
            table = opened[f].read_row_group(g)
            ids, labels = table.column("id").to_numpy(), table.column("label").to_numpy()
            for i, jpg in enumerate(table.column("jpg").to_pylist()):
                buf.append(_sample(ids[i], labels[i], jpg, self.decoder))
                if len(buf) == self.batch_size:
                    yield default_collate(buf)
                    buf = []
        if buf:
            yield default_collate(buf)


#: A packed sample's head (chapter 12's LMDB and HDF5 rows hold one sample each): its id and
#: label, two little-endian int64, then its JPEG bytes.
SAMPLE_HEAD = struct.Struct("<qq")


class ImageRows(Dataset):
    """Packed samples in chapter 12's rows (``LmdbRows``, ``Hdf5Rows``), decoded: ``dataset[k]``
    is sample ``k``'s dict.

    The rows open their file lazily in each reading process (chapter 12's fix for the
    handle-opened-before-fork trap) and name the file and sample when one cannot be read.
    """

    def __init__(self, rows, decoder: str = "pil"):
        self.rows, self.decoder = rows, decoder

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, k: int) -> dict:
        raw = self.rows[k][0].numpy().tobytes()
        sample_id, label = SAMPLE_HEAD.unpack_from(raw)
        return _sample(sample_id, label, raw[SAMPLE_HEAD.size:], self.decoder)


class _HFDecode:
    """Picklable per-example decode for HF datasets' ``.map`` (workers re-create it)."""

    def __init__(self, decoder: str):
        self.decoder = decoder

    def __call__(self, ex: dict) -> dict:
        img = decode_jpeg(ex["jpg"], self.decoder)
        return {"image": np.ascontiguousarray(img.transpose(2, 0, 1))}


class _DecodeItem:
    """Picklable: ``{"id", "label", "jpg"}`` -> the decoded sample (a library's transform)."""

    def __init__(self, decoder: str):
        self.decoder = decoder

    def __call__(self, item: dict) -> dict:
        return _sample(item["id"], item["label"], item["jpg"], self.decoder)


class _DecodeCollate:
    """Picklable collate: decode a list of ``{"id", "label", "jpg"}`` items, then batch."""

    def __init__(self, decoder: str):
        self.decode = _DecodeItem(decoder)

    def __call__(self, items: list) -> dict:
        return default_collate([self.decode(it) for it in items])


# -- the adapters ---------------------------------------------------------------------------
