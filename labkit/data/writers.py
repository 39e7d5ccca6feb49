"""Format writers behind :mod:`labkit.data.fixtures`, one class per fixture kind (ch. 00-14).

Each turns a resolved spec into files and returns ``(meta, samples)``; the content is seeded.
"""

from __future__ import annotations

import importlib
import io
import json
import tarfile
from pathlib import Path

import numpy as np

_CHUNK_ROWS = 65536  # rows generated per step; part of the definition of the content
_WORDS = (
    "data loader batch shard worker sample stream buffer shuffle epoch page cache disk "
    "memory tensor decode prefetch pinned queue token record column group arrow parquet "
    "tar json image label seed rank node index offset window latency bandwidth throughput "
    "copy map iterate stride slice file folder server range retry timeout resume state"
).split()


def shard_bounds(n: int, parts: int) -> list[int]:
    """Where ``n`` items cut into ``parts`` contiguous pieces (sizes differ by at most 1):
    ``parts + 1`` bounds, piece ``p`` is ``bounds[p]:bounds[p + 1]``."""
    if parts < 1:
        raise ValueError(f"parts={parts}: need at least one piece")
    return [p * n // parts for p in range(parts + 1)]


def _shards(spec: dict, ext: str) -> list[dict]:
    """The manifest of ``spec["shards"]`` files ``shard-NNNNN.ext``: file, first_id, samples."""
    b = shard_bounds(spec["samples"], spec["shards"])
    return [{"file": f"shard-{s:05d}.{ext}", "first_id": b[s], "samples": b[s + 1] - b[s]}
            for s in range(spec["shards"])]


class Writer:
    required: tuple[str, ...] = ("seed",)  # spec fields write() reads, checked up front

    def estimate_bytes(self, spec: dict) -> int:
        raise NotImplementedError

    def write(self, spec: dict, dest: Path, update) -> tuple[dict, int]:
        raise NotImplementedError


def _rows(spec: dict, start: int, stop: int, rng: np.random.Generator) -> np.ndarray:
    """Rows ``start..stop`` of a float32 matrix; column 0 holds the sample id."""
    block = rng.standard_normal((stop - start, spec["features"]), dtype=np.float32)
    block[:, 0] = np.arange(start, stop, dtype=np.float32)
    return block.astype(spec["dtype"], copy=False)


def _row_chunks(spec: dict, n: int):
    rng = np.random.default_rng(spec["seed"])
    for start in range(0, n, _CHUNK_ROWS):
        yield _rows(spec, start, min(n, start + _CHUNK_ROWS), rng)


class ArrayWriter(Writer):
    required = ("seed", "dtype", "features", "samples")
    def estimate_bytes(self, spec):
        return 2 * spec["samples"] * spec["features"] * np.dtype(spec["dtype"]).itemsize

    def write(self, spec, dest, update):
        n, shape = spec["samples"], (spec["samples"], spec["features"])
        with open(dest / "array.npy", "wb") as npy, open(dest / "array.raw", "wb") as raw:
            np.lib.format.write_array_header_1_0(npy, {
                "descr": np.lib.format.dtype_to_descr(np.dtype(spec["dtype"])),
                "fortran_order": False, "shape": shape})
            for chunk in _row_chunks(spec, n):
                buf = chunk.tobytes()
                npy.write(buf)
                raw.write(buf)
                update(2 * len(buf))
        return {"dtype": spec["dtype"], "shape": list(shape), "files": {
            "npy": "array.npy", "raw": "array.raw"}}, n


class NpyFilesWriter(Writer):
    required = ("seed", "dtype", "features", "samples")
    def estimate_bytes(self, spec):
        return spec["samples"] * (spec["features"] * np.dtype(spec["dtype"]).itemsize + 128)

    def write(self, spec, dest, update):
        (dest / "samples").mkdir()
        i = 0
        for chunk in _row_chunks(spec, spec["samples"]):
            for row in chunk:
                np.save(dest / "samples" / f"{i:07d}.npy", row)
                update(row.nbytes + 128)
                i += 1
        return {"dtype": spec["dtype"], "sample_shape": [spec["features"]],
                "pattern": "samples/{id:07d}.npy"}, i


class NpyShardsWriter(Writer):
    required = ("seed", "dtype", "features", "samples", "shards")
    def estimate_bytes(self, spec):
        return spec["samples"] * spec["features"] * np.dtype(spec["dtype"]).itemsize

    def write(self, spec, dest, update):
        chunks = _row_chunks(spec, spec["samples"])  # the rows of "array", cut into shards
        pending = np.empty((0, spec["features"]), spec["dtype"])
        shards = _shards(spec, "npy")
        for sh in shards:
            parts, k = [pending], sh["samples"]
            while sum(len(p) for p in parts) < k:
                parts.append(next(chunks))
            buf = np.concatenate(parts)
            rows, pending = buf[:k], buf[k:]
            np.save(dest / sh["file"], rows)
            update(rows.nbytes)
        return {"dtype": spec["dtype"], "sample_shape": [spec["features"]],
                "shards": shards}, spec["samples"]


def synth_image(seed: int, i: int, size: int, classes: int) -> tuple[np.ndarray, int]:
    """A deterministic RGB image whose colour and stripe frequency depend on its label."""
    rng = np.random.default_rng([seed, i])
    label = int(rng.integers(classes))
    y, x = np.mgrid[0:size, 0:size].astype(np.float32) / size
    angle = rng.uniform(0, np.pi)
    freq = 2 + 2 * label
    wave = np.sin(2 * np.pi * freq * (x * np.cos(angle) + y * np.sin(angle)))
    hue = np.array([np.sin(label), np.cos(label), np.sin(2 * label)], np.float32)
    img = 128 + 60 * wave[..., None] * hue + rng.normal(0, 18, (size, size, 3))
    return np.clip(img, 0, 255).astype(np.uint8), label


def encode_jpeg(img: np.ndarray, quality: int) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


class JpegWriter(Writer):
    required = ("seed", "classes", "quality", "samples", "size")

    def estimate_bytes(self, spec):
        return spec["samples"] * spec["size"] ** 2 * 2 // 3  # noisy images: ~0.6-0.7 B/pixel

    def write(self, spec, dest, update):
        (dest / "images").mkdir()
        lines = ["id,label,file"]
        for i in range(spec["samples"]):
            img, label = synth_image(spec["seed"], i, spec["size"], spec["classes"])
            data = encode_jpeg(img, spec["quality"])
            rel = f"images/{i:07d}.jpg"
            (dest / rel).write_bytes(data)
            lines.append(f"{i},{label},{rel}")
            update(len(data))
        (dest / "labels.csv").write_text("\n".join(lines) + "\n")
        return {"classes": spec["classes"], "size": spec["size"], "labels": "labels.csv"}, \
            spec["samples"]


def tar_add(tar: tarfile.TarFile, name: str, data: bytes, owner: str = "labkit") -> None:
    """Add member ``name`` with fixed time, mode and owner: byte-identical tars."""
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), 0, 0o644
    info.uname = info.gname = owner
    tar.addfile(info, io.BytesIO(data))


class WebDatasetWriter(Writer):
    required = ("seed", "classes", "quality", "features", "samples", "shards", "size")

    def estimate_bytes(self, spec):
        return spec["samples"] * (spec["size"] ** 2 * 2 // 3 + 3 * 512 + 4 * spec["features"])

    def write(self, spec, dest, update):
        shards = _shards(spec, "tar")
        for sh in shards:
            # Plain tarfile, not webdataset.TarWriter: TarWriter stamps the current time
            # into every member, and the fixture must be byte-identical across runs.
            with tarfile.open(dest / sh["file"], "w", format=tarfile.USTAR_FORMAT) as tar:
                for i in range(sh["first_id"], sh["first_id"] + sh["samples"]):
                    img, label = synth_image(spec["seed"], i, spec["size"], spec["classes"])
                    vec = np.random.default_rng([spec["seed"], i, 1]).standard_normal(
                        spec["features"], dtype=np.float32)
                    vec[0] = i
                    npy = io.BytesIO()
                    np.save(npy, vec)
                    key = f"{i:07d}"
                    jpg = encode_jpeg(img, spec["quality"])
                    tar_add(tar, f"{key}.jpg", jpg)
                    tar_add(tar, f"{key}.cls", str(label).encode())
                    tar_add(tar, f"{key}.npy", npy.getvalue())
                    update(len(jpg) + 1536 + vec.nbytes)
        return {"classes": spec["classes"], "size": spec["size"], "shards": shards,
                "keys": ["jpg", "cls", "npy"]}, spec["samples"]


def _texts(rng: np.random.Generator, n: int) -> list[str]:
    lengths = rng.integers(8, 33, n)
    words = np.array(_WORDS)[rng.integers(0, len(_WORDS), int(lengths.sum()))]
    return [" ".join(w) for w in np.split(words, np.cumsum(lengths)[:-1])] if n else []


class ParquetWriter(Writer):
    required = ("seed", "classes", "features", "samples", "shards", "row_group")

    def estimate_bytes(self, spec):
        return spec["samples"] * (4 * spec["features"] + 150)

    def write(self, spec, dest, update):
        import pyarrow as pa
        import pyarrow.parquet as pq

        f = spec["features"]
        shards = _shards(spec, "parquet")
        for s, sh in enumerate(shards):
            lo, hi = sh["first_id"], sh["first_id"] + sh["samples"]
            rng = np.random.default_rng([spec["seed"], s])
            feats = rng.standard_normal((hi - lo, f), dtype=np.float32)
            feats[:, 0] = np.arange(lo, hi)
            table = pa.table({
                "id": pa.array(np.arange(lo, hi, dtype=np.int64)),
                "label": pa.array(rng.integers(0, spec["classes"], hi - lo).astype(np.int16)),
                "features": pa.FixedSizeListArray.from_arrays(pa.array(feats.ravel()), f),
                "text": pa.array(_texts(rng, hi - lo)),
            })
            pq.write_table(table, dest / sh["file"], row_group_size=spec["row_group"],
                           compression="snappy")
            update(table.nbytes)
        return {"columns": ["id", "label", "features", "text"], "features": f,
                "row_group": spec["row_group"], "shards": shards}, spec["samples"]


class JsonlWriter(Writer):
    required = ("seed", "classes", "samples", "shards")
    def estimate_bytes(self, spec):
        return spec["samples"] * 150

    def write(self, spec, dest, update):
        shards = _shards(spec, "jsonl")
        for s, sh in enumerate(shards):
            lo, k = sh["first_id"], sh["samples"]
            rng = np.random.default_rng([spec["seed"], s])
            labels = rng.integers(0, spec["classes"], k)
            texts = _texts(rng, k)
            with open(dest / sh["file"], "w") as fh:
                fh.writelines(json.dumps({"id": lo + j, "label": int(labels[j]), "text": texts[j]})
                              + "\n" for j in range(k))
            update(k * 150)
        return {"shards": shards, "fields": ["id", "label", "text"]}, spec["samples"]


WRITERS: dict[str, Writer] = {
    "array": ArrayWriter(),
    "npy_files": NpyFilesWriter(),
    "npy_shards": NpyShardsWriter(),
    "jpeg": JpegWriter(),
    "webdataset": WebDatasetWriter(),
    "parquet": ParquetWriter(),
    "jsonl": JsonlWriter(),
}


# Kinds whose writers live beside their chapter's code: (module, class), imported when a spec
# names one.
CHAPTER_KINDS = {"corpus": ("labkit.tokens.corpus", "CorpusWriter"),
                 "video": ("labkit.media.writers", "VideoWriter"),
                 "audio": ("labkit.media.writers", "AudioWriter")}


def writer_for(kind: str) -> Writer | None:
    """The writer of a fixture kind, importing its chapter's module if it has one."""
    if kind not in WRITERS and kind in CHAPTER_KINDS:
        module, name = CHAPTER_KINDS[kind]
        WRITERS[kind] = getattr(importlib.import_module(module), name)()
    return WRITERS.get(kind)
