"""The bake-off's shared datasets: by-hand streams and picklable decoders (chapter 16)."""

from __future__ import annotations

import struct
import tarfile

import numpy as np
import torch
from torch.utils.data import default_collate

from ...errors import DataFormatError
from ...formats.hdf5rows import open_hdf5
from ...formats.lazy import LazyFile
from ...formats.lmdbrows import open_env, sample_key
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


#: An LMDB value's head: the sample's id and label, then its JPEG bytes.
LMDB_HEAD = struct.Struct("<qq")


class LmdbImages(LazyFile):
    """Map-style JPEGs in one LMDB environment: ``dataset[k]`` is sample ``k``'s dict.

    The environment opens lazily in each reading process, once per file per process
    (chapter 12's fix for the handle-opened-before-fork trap).
    """

    def __init__(self, folder, decoder: str = "pil"):
        super().__init__(folder)
        self.decoder = decoder
        self.samples = open_env(self.path).stat()["entries"]

    def open(self):
        return open_env(self.path)

    def __len__(self) -> int:
        return self.samples

    def __getitem__(self, k: int) -> dict:
        with self.handle.begin(buffers=True) as txn:
            raw = txn.get(sample_key(k))
            if raw is None:
                raise DataFormatError(f"{self.path}: sample {k} is missing: no key "
                                      f"{sample_key(k).decode()}")
            sample_id, label = LMDB_HEAD.unpack_from(raw)
            jpg = bytes(raw[LMDB_HEAD.size:])
        return _sample(sample_id, label, jpg, self.decoder)


class Hdf5Images(LazyFile):
    """Map-style JPEGs in one HDF5 file (``id``, ``label``, variable-length ``jpg``).

    Ids and labels are read once; the file opens lazily in each reading process.
    """

    def __init__(self, path, decoder: str = "pil"):
        super().__init__(path)
        self.decoder = decoder
        with open_hdf5(self.path, "jpg") as f:
            self.ids, self.labels = f["id"][:], f["label"][:]

    def open(self):
        return open_hdf5(self.path, "jpg")

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, k: int) -> dict:
        return _sample(self.ids[k], self.labels[k], self.handle["jpg"][k].tobytes(),
                       self.decoder)


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
