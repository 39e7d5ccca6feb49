"""Tar shards in an object store: writing, streaming, caching, retrying (chapter 14).

:func:`write_s3_shards` packs rows (column 0 is the id) into tar shards of about
``shard_bytes`` each (webdataset naming: ``{id:08d}.f32`` members) and puts them in a bucket.
:class:`S3ShardStream` reads them back with boto3, split over rank x worker
(:class:`~labkit.streams.split.SplitStream`), ``in_flight`` GETs ahead per worker, an optional
byte-capped local :class:`ShardCache`, a sample shuffle buffer, exact resume, and a retry of
the GET when the body breaks mid-object (botocore retries 5xx and first-byte timeouts itself,
but not a body cut short after the headers). Bad objects fail naming ``s3://bucket/key``, or
are skipped and counted (``on_error="skip"``). :func:`shard_efficiency` is the model the
chapter puts beside the measurements.
"""

from __future__ import annotations

import io
import os
import tarfile
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

import numpy as np
import torch

from ..errors import DataFormatError
from ..instruments.timer import best_of
from ..streams.split import ResumableStream
from .store import s3_client


def shard_efficiency(shard_bytes, latency_s: float, bytes_per_s: float):
    """The share of a GET spent moving bytes: ``transfer / (latency + transfer)``."""
    transfer = np.asarray(shard_bytes, dtype=np.float64) / bytes_per_s
    return transfer / (latency_s + transfer)


def shard_bytes_for(efficiency: float, latency_s: float, bytes_per_s: float) -> float:
    """The smallest shard that reaches ``efficiency`` (the model solved for the size)."""
    if not 0 < efficiency < 1:
        raise ValueError(f"efficiency={efficiency}: between 0 and 1, exclusive")
    return efficiency / (1 - efficiency) * latency_s * bytes_per_s


@dataclass(frozen=True)
class ShardSet:
    """Shards written to a bucket: ``keys``, their ``nbytes`` and sample ``counts``."""

    bucket: str
    keys: tuple[str, ...]
    nbytes: tuple[int, ...]
    counts: tuple[int, ...]

    @property
    def first_ids(self) -> list[int]:
        return [int(x) for x in np.cumsum((0,) + self.counts[:-1])]

    @property
    def samples(self) -> int:
        return sum(self.counts)

    @property
    def mean_bytes(self) -> float:
        return float(np.mean(self.nbytes))

    def urls(self) -> list[str]:
        return [f"s3://{self.bucket}/{k}" for k in self.keys]


def tar_rows(rows: np.ndarray) -> bytes:
    """One tar shard of rows: a ``{id:08d}.f32`` member per row (its raw float32 bytes)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for row in rows:
            data = np.ascontiguousarray(row, dtype=np.float32).tobytes()
            info = tarfile.TarInfo(f"{int(row[0]):08d}.f32")
            info.size, info.mtime = len(data), 0  # mtime 0: the same bytes on every run
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def write_s3_shards(rows: np.ndarray, store, bucket: str, shard_bytes: int,
                    prefix: str = "") -> ShardSet:
    """Pack ``rows`` into tar shards of about ``shard_bytes`` and put them in ``bucket``."""
    per_row = 512 + -(-rows.shape[1] * 4 // 512) * 512   # tar header + padded member
    per_shard = max(1, int(shard_bytes) // per_row)
    s3 = store.client(direct=True)
    store.make_bucket(bucket, s3)
    keys, nbytes, counts = [], [], []
    for s, start in enumerate(range(0, len(rows), per_shard)):
        data = tar_rows(rows[start:start + per_shard])
        key = f"{prefix.rstrip('/') + '/' if prefix else ''}shard-{s:05d}.tar"
        s3.put_object(Bucket=bucket, Key=key, Body=data)
        keys.append(key)
        nbytes.append(len(data))
        counts.append(min(per_shard, len(rows) - start))
    return ShardSet(bucket, tuple(keys), tuple(nbytes), tuple(counts))


def parse_shard(data: bytes, where: str) -> list[tuple[int, np.ndarray]]:
    """``(id, row)`` for every member of a shard; a clear error naming ``where`` if bad."""
    out = []
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            for m in tar:
                f = tar.extractfile(m)
                payload = f.read() if f else b""
                if len(payload) != m.size:
                    raise DataFormatError(f"{where}: member {m.name} is cut short "
                                          f"({len(payload)} of {m.size} bytes)")
                out.append((int(m.name.split(".")[0]), np.frombuffer(payload, np.float32)))
    except tarfile.ReadError as e:
        what = "is truncated" if out or data[257:262] == b"ustar" else "is not a tar archive"
        raise DataFormatError(f"{where} {what} ({e}; {len(data)} bytes)") from None
    if not out:
        raise DataFormatError(f"{where}: no samples ({len(data)} bytes)")
    if data[-1024:] != bytes(1024):
        # cut at a member boundary, tarfile just stops: the end-of-archive blocks tell
        raise DataFormatError(f"{where} is truncated (no end-of-archive marker after "
                              f"{len(out)} samples; {len(data)} bytes)")
    return out


@dataclass
class ShardCache:
    """A local shard cache with a byte cap, least recently used evicted first (chapter 14).

    Files live in ``folder`` (one per key); hits and misses are counted in this process.
    """

    folder: Path
    max_bytes: int
    hits: int = 0
    misses: int = 0
    evictions: int = 0
    _used: dict = field(default_factory=dict)   # key -> bytes, in use order (oldest first)

    def __post_init__(self):
        self.folder = Path(self.folder)
        self.folder.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        return self.folder / key.replace("/", "%2F")

    def get(self, key: str) -> bytes | None:
        p = self._path(key)
        if key in self._used and p.is_file():
            self._used[key] = self._used.pop(key)   # now the most recent
            self.hits += 1
            return p.read_bytes()
        self.misses += 1
        return None

    def put(self, key: str, data: bytes) -> None:
        if len(data) > self.max_bytes:
            return   # bigger than the whole cache: never kept
        while self._used and self.bytes + len(data) > self.max_bytes:
            old = next(iter(self._used))
            self._used.pop(old)
            self._path(old).unlink(missing_ok=True)
            self.evictions += 1
        tmp = self._path(key).with_suffix(".part")
        tmp.write_bytes(data)
        os.replace(tmp, self._path(key))
        self._used[key] = len(data)

    @property
    def bytes(self) -> int:
        return sum(self._used.values())

    def stats(self) -> dict:
        looks = self.hits + self.misses
        return {"hits": self.hits, "misses": self.misses, "evictions": self.evictions,
                "hit_rate": self.hits / looks if looks else 0.0, "bytes": self.bytes,
                "max_bytes": self.max_bytes}

    def reset_stats(self) -> None:
        self.hits = self.misses = self.evictions = 0


class S3ShardStream(ResumableStream):
    """Samples ``(row, id)`` streamed from tar shards in a bucket (chapter 14).

    Args:
        endpoint_url: the store (``store.endpoint_url``); each process makes its own client.
        shards: a :class:`ShardSet` (bucket, keys, sample counts).
        in_flight: GETs running ahead of the reader, per worker (1: one at a time).
        cache: a :class:`ShardCache` to read through (``None``: every epoch from the store).
        buffer_size: shuffle samples through a buffer this big (0: shard order).
        seed: shuffle the shard order (anew per :meth:`set_epoch`); ``None`` keeps it.
        on_error: ``"raise"`` (a bad object fails naming ``s3://bucket/key``) or ``"skip"``
            (its samples are dropped, the key counted in ``skipped``).
        body_retries: GETs tried again when the body breaks after the headers.
        client: keyword arguments for :func:`~labkit.objstore.store.s3_client`
            (``retries``, ``max_attempts``, ``read_timeout``, credentials).
    """

    def __init__(self, endpoint_url: str, shards: ShardSet, *, in_flight: int = 1,
                 cache: ShardCache | None = None, buffer_size: int = 0,
                 seed: int | None = None, on_error: str = "raise", body_retries: int = 3,
                 client: dict | None = None, rank: int | None = None,
                 world_size: int | None = None):
        super().__init__(seed=seed, rank=rank, world_size=world_size, buffer_size=buffer_size)
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error={on_error!r}: 'raise' or 'skip'")
        if in_flight < 1:
            raise ValueError(f"in_flight={in_flight}: at least 1")
        self.endpoint_url, self.shards = endpoint_url, shards
        self.in_flight, self.cache = in_flight, cache
        self.on_error, self.body_retries = on_error, body_retries
        self.client_kwargs = dict(client or {})
        self.client_kwargs.setdefault("max_pool_connections", max(10, in_flight))
        self.skipped: list[str] = []
        self.retried: list[str] = []    # keys whose body broke and was fetched again
        self.botocore_retries = 0       # retries botocore made itself (5xx, timeouts)
        self._client, self._pid = None, None

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_client"] = state["_pid"] = None   # a client is made in the process that reads
        return state

    def client(self):
        if self._client is None or self._pid != os.getpid():
            self._client, self._pid = s3_client(self.endpoint_url, **self.client_kwargs), \
                os.getpid()
        return self._client

    def where(self, key: str) -> str:
        return f"s3://{self.shards.bucket}/{key}"

    def fetch(self, key: str) -> bytes | None:
        """A shard's bytes (from the cache if there); ``None`` for a skipped object."""
        if self.cache is not None:
            data = self.cache.get(key)
            if data is not None:
                return data
        try:
            data = self._get(key)
        except (FileNotFoundError, PermissionError, OSError, DataFormatError):
            if self.on_error == "skip":
                self.skipped.append(key)
                return None
            raise
        if self.cache is not None:
            self.cache.put(key, data)
        return data

    def _get(self, key: str) -> bytes:
        from botocore.exceptions import (
            ClientError,
            ConnectionClosedError,
            IncompleteReadError,
            ReadTimeoutError,
            ResponseStreamingError,
        )
        from urllib3.exceptions import ProtocolError

        for attempt in range(self.body_retries + 1):
            try:
                resp = self.client().get_object(Bucket=self.shards.bucket, Key=key)
                self.botocore_retries += resp["ResponseMetadata"].get("RetryAttempts", 0)
                data = resp["Body"].read()
                size = resp.get("ContentLength")
                if size is not None and len(data) != size:   # botocore's own check raises
                    raise ResponseStreamingError(error=f"{len(data)} of {size} bytes")
                return data
            except ClientError as e:
                code = e.response.get("Error", {}).get("Code", "?")
                status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
                if code in ("NoSuchKey", "404") or status == 404:
                    raise FileNotFoundError(f"{self.where(key)}: no such key in bucket "
                                            f"{self.shards.bucket!r} ({code})") from None
                if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied"):
                    raise PermissionError(f"{self.where(key)}: the store refused the "
                                          f"credentials ({code})") from None
                raise OSError(f"{self.where(key)}: {code} after botocore's retries "
                              f"({e})") from None
            except (ResponseStreamingError, IncompleteReadError, ProtocolError,
                    ConnectionClosedError, ReadTimeoutError) as e:
                if attempt == self.body_retries:
                    raise OSError(f"{self.where(key)}: the body broke "
                                  f"{attempt + 1} times ({type(e).__name__})") from None
                self.retried.append(key)
        raise AssertionError("unreachable")

    def _counts(self, share: list[int]) -> list[int]:
        return [self.shards.counts[s] for s in share]

    def __iter__(self):
        place = self.place()
        share = self.share(len(self.shards.keys), place)
        skip = self.resume_point()
        # whole shards before the resume point are not fetched again
        counts = self._counts(share)
        first = 0
        while first < len(share) and skip >= counts[first] and self.buffer_size == 0:
            skip -= counts[first]
            first += 1
        keys = [self.shards.keys[s] for s in share[first:]]
        samples = self.buffered(self._samples(keys), place)
        yield from self.counted(islice(samples, skip, None))

    def _samples(self, keys: list[str]):
        pool = ThreadPoolExecutor(self.in_flight) if self.in_flight > 1 else None
        try:
            ahead: deque = deque()
            todo = iter(keys)
            for key in todo:   # fill the window, then take one, submit one
                ahead.append((key, pool.submit(self.fetch, key) if pool else None))
                if len(ahead) >= self.in_flight:
                    break
            while ahead:
                key, fut = ahead.popleft()
                data = fut.result() if fut else self.fetch(key)
                nxt = next(todo, None)
                if nxt is not None:
                    ahead.append((nxt, pool.submit(self.fetch, nxt) if pool else None))
                if data is None:
                    continue
                try:
                    rows = parse_shard(data, self.where(key))
                    want = self.shards.counts[self.shards.keys.index(key)]
                    if len(rows) != want:
                        raise DataFormatError(f"{self.where(key)} holds {len(rows)} samples, "
                                              f"the shard list says {want}")
                except DataFormatError:
                    if self.on_error == "skip":
                        self.skipped.append(key)
                        continue
                    raise
                for i, row in rows:
                    yield torch.from_numpy(row.copy()), i
        finally:
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)

    def fingerprint(self) -> dict:
        return {**super().fingerprint(), "shards": len(self.shards.keys)}


def timed_gets(client, bucket: str, keys, in_flight: int = 1) -> dict:
    """GET every key with ``in_flight`` at a time; seconds, bytes, requests/s, bytes/s."""
    sizes: list[int] = []

    def get(key):
        return len(client.get_object(Bucket=bucket, Key=key)["Body"].read())

    def run():
        if in_flight == 1:
            sizes[:] = [get(k) for k in keys]
        else:
            with ThreadPoolExecutor(in_flight) as pool:
                sizes[:] = list(pool.map(get, keys))

    s = best_of(run, repeats=1, warmup=0).best_s
    return {"seconds": s, "bytes": sum(sizes), "requests": len(sizes),
            "requests_per_s": len(sizes) / s, "bytes_per_s": sum(sizes) / s}

