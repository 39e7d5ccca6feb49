"""An S3-compatible object store on loopback, behind a fault layer (chapter 14).

:func:`s3_store` starts moto's S3 server (a real S3 API: buckets, ``ListObjectsV2``, range
GETs, multipart) in a child process bound to ``127.0.0.1``, puts the
:class:`~labkit.objstore.s3proxy.FaultProxy` in front of it (latency, bandwidth, faults) and
hands out clients pointed at the proxy: boto3 (:meth:`ObjectStore.client`), fsspec/s3fs
(:meth:`ObjectStore.storage_options`) and pyarrow (:meth:`ObjectStore.arrow_filesystem`);
:meth:`ObjectStore.cleanup` runs MosaicML Streaming, LitData or Ray against it and removes
what they leave behind. ``stop()`` (or leaving the ``with`` block) ends the proxy and the
server process.
"""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from ..loading.processes import stop_processes
from .leftovers import MosaicShm, litdata_contained, scoped_env, start_ray
from .s3proxy import FaultProxy

ACCESS_KEY = "labkit"
SECRET_KEY = "labkit-secret"
REGION = "us-east-1"


class Shards(NamedTuple):
    """Tar shards put in a bucket by :meth:`ObjectStore.put_tar_shards`."""

    bucket: str
    keys: tuple[str, ...]
    nbytes: tuple[int, ...]   # each object's size
    counts: tuple[int, ...]   # samples per shard, in key order


class ObjectStore:
    """A running loopback S3 store (see :func:`s3_store`).

    Attributes:
        endpoint_url: the proxy's URL, what every client is given.
        direct_url: moto's own URL, with no latency and no faults (filling, baselines).
        proxy: the :class:`~labkit.objstore.s3proxy.FaultProxy`.
    """

    def __init__(self, *, latency_s: float = 0.0, bandwidth: float | None = None, faults=(),
                 start_timeout_s: float = 30.0):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY,
                   MOTO_ALLOW_NONEXISTENT_REGION="true")
        self._err = tempfile.TemporaryFile()   # werkzeug logs every request: a file, no pipe
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=subprocess.DEVNULL, stderr=self._err, env=env)
        self.direct_url = f"http://127.0.0.1:{port}"
        self.proxy = None
        try:
            self._wait_ready(port, start_timeout_s)
            self.proxy = FaultProxy(("127.0.0.1", port), latency_s=latency_s,
                                    bandwidth=bandwidth, faults=faults, access_key=ACCESS_KEY)
        except BaseException:
            self.stop()
            raise
        self.endpoint_url = self.proxy.url

    def _wait_ready(self, port: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                self._err.seek(0)
                err = self._err.read().decode(errors="replace")[-800:]
                raise RuntimeError(f"moto's S3 server exited at start (code "
                                   f"{self._proc.returncode}): {err}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise TimeoutError(f"moto's S3 server did not listen on 127.0.0.1:{port} "
                           f"within {timeout_s:g} s")

    @property
    def pid(self) -> int:
        return self._proc.pid

    def configure(self, **settings) -> None:
        """Change ``latency_s``, ``bandwidth`` or ``faults`` of the fault layer."""
        self.proxy.configure(**settings)

    def settings(self) -> dict:
        """The fault layer's settings in force (record them with every result)."""
        return self.proxy.settings()

    @property
    def log(self):
        """Every request the fault layer answered (``lk.remote.serve``'s ``Request`` rows)."""
        return self.proxy.log

    # --- clients ------------------------------------------------------------------------
    def client(self, *, direct: bool = False, max_pool_connections: int = 16):
        """A boto3 S3 client on the store, botocore's standard retries (5 attempts)."""
        import boto3
        from botocore.config import Config

        cfg = Config(retries={"mode": "standard", "total_max_attempts": 5},
                     max_pool_connections=max_pool_connections, s3={"addressing_style": "path"})
        return boto3.client("s3", endpoint_url=self.direct_url if direct else self.endpoint_url,
                            aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
                            region_name=REGION, config=cfg)

    def storage_options(self, direct: bool = False) -> dict:
        """fsspec/s3fs options for ``s3://`` URLs (``datasets``, webdataset, pandas)."""
        return {"key": ACCESS_KEY, "secret": SECRET_KEY,
                "client_kwargs": {"endpoint_url": self.direct_url if direct
                                  else self.endpoint_url, "region_name": REGION},
                "config_kwargs": {"s3": {"addressing_style": "path"}}}

    def arrow_filesystem(self, direct: bool = False):
        """pyarrow's own S3 client (the AWS C++ SDK), endpoint overridden to the store."""
        from pyarrow import fs

        url = self.direct_url if direct else self.endpoint_url
        return fs.S3FileSystem(access_key=ACCESS_KEY, secret_key=SECRET_KEY, region=REGION,
                               scheme="http", endpoint_override=url.split("://", 1)[1],
                               retry_strategy=fs.AwsStandardS3RetryStrategy(max_attempts=5))

    @contextmanager
    def cleanup(self, system: str, **options):
        """What MosaicML Streaming, LitData or Ray leave behind, cleaned up after the block
        (chapter 14b types each system's run inside it).

        ``"mosaic"``: the store's endpoint and credentials (``S3_ENDPOINT_URL``,
        ``AWS_*``; ``options`` add or override variables) set inside the block only; yields
        a :class:`~labkit.objstore.leftovers.MosaicShm` (``track`` each dataset), released
        after. ``"litdata"``: ``litdata.optimize`` inside the block leaves the start method,
        the SIGINT handler and the temp folder as they were. ``"ray"``: Ray started for one
        local node (``num_cpus``, default 1), tried again if slow to start, shut down after;
        yields ``ray``.
        """
        if system == "mosaic":
            shm = MosaicShm()
            with scoped_env(**{"S3_ENDPOINT_URL": self.endpoint_url,
                               "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                               "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
                               "AWS_DEFAULT_REGION": REGION, **options}):
                try:
                    yield shm
                finally:
                    shm.release()
        elif system == "litdata":
            with litdata_contained():
                yield
        elif system == "ray":
            import ray

            start_ray(ray, options.get("num_cpus", 1))
            try:
                yield ray
            finally:
                ray.shutdown()
        else:
            raise ValueError(f"cleanup({system!r}): 'mosaic', 'litdata' or 'ray'")

    # --- filling (straight to moto: no latency, no faults; setup, not the lesson) --------
    def make_bucket(self, bucket: str, s3=None) -> None:
        s3 = s3 or self.client(direct=True)
        try:
            s3.create_bucket(Bucket=bucket)
        except s3.exceptions.BucketAlreadyOwnedByYou:
            pass

    def put_files(self, bucket: str, files, prefix: str = "", root=None) -> list[str]:
        """Create ``bucket`` (if needed) and upload ``files`` under ``prefix``; the keys."""
        s3 = self.client(direct=True)
        self.make_bucket(bucket, s3)
        keys = []
        for f in map(Path, files):
            rel = f.relative_to(root).as_posix() if root else f.name
            keys.append(f"{prefix.rstrip('/')}/{rel}" if prefix else rel)
            s3.upload_file(str(f), bucket, keys[-1])
        return keys

    def put_tar_shards(self, bucket: str, rows, shard_bytes: int) -> Shards:
        """``rows`` (column 0 the id) as tar shards of about ``shard_bytes`` in ``bucket``:
        one ``{id:08d}.f32`` member per row (webdataset's naming), its float32 bytes."""
        import numpy as np

        per_row = 512 + -(-rows.shape[1] * 4 // 512) * 512   # tar header + padded member
        per_shard = max(1, int(shard_bytes) // per_row)
        s3 = self.client(direct=True)
        self.make_bucket(bucket, s3)
        keys, nbytes, counts = [], [], []
        for s, start in enumerate(range(0, len(rows), per_shard)):
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
                for row in rows[start:start + per_shard]:
                    data = np.ascontiguousarray(row, dtype=np.float32).tobytes()
                    info = tarfile.TarInfo(f"{int(row[0]):08d}.f32")
                    info.size = len(data)   # mtime stays 0: the same bytes on every run
                    tar.addfile(info, io.BytesIO(data))
            keys.append(f"shard-{s:05d}.tar")
            s3.put_object(Bucket=bucket, Key=keys[-1], Body=buf.getvalue())
            nbytes.append(len(buf.getvalue()))
            counts.append(min(per_shard, len(rows) - start))
        return Shards(bucket, tuple(keys), tuple(nbytes), tuple(counts))

    # --- lifetime -----------------------------------------------------------------------
    def stop(self) -> None:
        """Stop the proxy and the server process; idempotent."""
        if self.proxy is not None:
            self.proxy.stop()
        if self._proc.poll() is None:
            import psutil

            try:
                stop_processes([psutil.Process(self._proc.pid)])
            except psutil.NoSuchProcess:
                pass
        self._proc.wait(timeout=10)
        self._err.close()

    def __enter__(self) -> ObjectStore:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = getattr(self, "endpoint_url", "?")
        return f"<lk.objstore.s3_store at {where} (moto pid {self.pid})>"


def s3_store(*, latency_s: float = 0.0, bandwidth: float | None = None,
             faults=()) -> ObjectStore:
    """Start an S3-compatible store on 127.0.0.1 behind a fault layer (chapter 14).

    Args:
        latency_s: seconds before every answer's first byte (a far region).
        bandwidth: bytes/s per connection (``None``: as fast as loopback goes).
        faults: :class:`~labkit.Fault` s matched against ``bucket/key`` (503 SlowDown, 500,
            ``drop`` = reset mid-object, ``stall`` = slow first byte).

    Use it in a ``with`` block (or call ``stop()``) so it always stops.
    """
    return ObjectStore(latency_s=latency_s, bandwidth=bandwidth, faults=faults)
