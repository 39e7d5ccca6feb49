"""An S3-compatible object store on loopback, with its fault layer and clients (chapter 14).

:func:`s3_store` starts moto's S3 server (a real S3 API: buckets, ``ListObjectsV2``, range
GETs, multipart) in a child process bound to ``127.0.0.1``, puts a
:class:`~labkit.objstore.s3proxy.FaultProxy` in front of it (latency, bandwidth, faults) and
hands out clients pointed at the proxy: boto3 (:meth:`ObjectStore.client`), fsspec/s3fs
(:meth:`ObjectStore.storage_options`, the same dict ``datasets`` and webdataset take) and
pyarrow (:meth:`ObjectStore.arrow_filesystem`). ``stop()`` (or leaving the ``with`` block)
ends the proxy and the server process; nothing is left listening.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..loading.processes import stop_processes
from .s3proxy import FaultProxy

ACCESS_KEY = "labkit"
SECRET_KEY = "labkit-secret"
REGION = "us-east-1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ObjectStore:
    """A running loopback S3 store (see :func:`s3_store`).

    Attributes:
        endpoint_url: the proxy's URL, what every client is given.
        direct_url: moto's own URL, with no latency and no faults (for baselines).
        proxy: the :class:`~labkit.objstore.s3proxy.FaultProxy` (its ``log``, ``configure``).
    """

    def __init__(self, *, latency_s: float = 0.0, bandwidth: float | None = None, faults=(),
                 start_timeout_s: float = 30.0):
        port = _free_port()
        env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY,
                   MOTO_ALLOW_NONEXISTENT_REGION="true")
        # werkzeug logs every request to stderr: a file, never a pipe nobody drains
        self._err = tempfile.TemporaryFile()
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

    # --- settings -----------------------------------------------------------------------
    def configure(self, **settings) -> None:
        """Change ``latency_s``, ``bandwidth`` or ``faults`` of the fault layer (fault
        counters restart with a new list)."""
        self.proxy.configure(**settings)

    def settings(self) -> dict:
        """The fault layer's settings in force (record them with every result)."""
        return self.proxy.settings()

    @property
    def log(self):
        """Every request the fault layer answered (``lk.remote.serve``'s ``Request`` rows)."""
        return self.proxy.log

    def count(self, method: str = "GET", since: int = 0) -> int:
        """How many ``method`` requests the store answered (after request number ``since``)."""
        return sum(1 for r in self.proxy.log if r.method == method and r.n > since)

    def table(self, last: int | None = None) -> str:
        """The last requests as a fixed-width table (path is ``bucket/key``)."""
        rows = self.proxy.log[-last if last else None:]
        head = f"{'n':>4}  {'method':<6} {'bucket/key':<34} {'status':>6} {'bytes':>10}  fault"
        lines = [head, "-" * len(head)]
        for r in rows:
            lines.append(f"{r.n:>4}  {r.method:<6} {r.path[:34]:<34} {r.status or '-':>6} "
                         f"{r.bytes_sent:>10}  {r.fault or ''}")
        return "\n".join(lines)

    # --- clients ------------------------------------------------------------------------
    def client(self, *, direct: bool = False, **kwargs):
        """A boto3 S3 client on the store (see :func:`s3_client` for the options)."""
        return s3_client(self.direct_url if direct else self.endpoint_url, **kwargs)

    def storage_options(self, direct: bool = False, **client_kwargs) -> dict:
        """fsspec/s3fs options for ``s3://`` URLs (``datasets``, webdataset, pandas)."""
        return {"key": ACCESS_KEY, "secret": SECRET_KEY,
                "client_kwargs": {"endpoint_url": self.direct_url if direct
                                  else self.endpoint_url, "region_name": REGION,
                                  **client_kwargs},
                "config_kwargs": {"s3": {"addressing_style": "path"}}}

    def filesystem(self, direct: bool = False, **kwargs):
        """An ``s3fs.S3FileSystem`` on the store (fresh instance, no listing cache)."""
        import s3fs

        return s3fs.S3FileSystem(skip_instance_cache=True, **self.storage_options(direct),
                                 **kwargs)

    def arrow_filesystem(self, direct: bool = False):
        """pyarrow's own S3 client (the AWS C++ SDK), endpoint overridden to the store."""
        from pyarrow import fs

        url = self.direct_url if direct else self.endpoint_url
        return fs.S3FileSystem(access_key=ACCESS_KEY, secret_key=SECRET_KEY, region=REGION,
                               scheme="http", endpoint_override=url.split("://", 1)[1],
                               retry_strategy=fs.AwsStandardS3RetryStrategy(max_attempts=5))

    def env(self) -> dict:
        """Environment variables that point AWS tools (and libraries that read them) here."""
        return {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
                "AWS_DEFAULT_REGION": REGION, "AWS_ENDPOINT_URL": self.endpoint_url,
                "AWS_ENDPOINT_URL_S3": self.endpoint_url, "S3_ENDPOINT_URL": self.endpoint_url}

    # --- filling ------------------------------------------------------------------------
    def put_files(self, bucket: str, files, prefix: str = "", root=None) -> list[str]:
        """Create ``bucket`` (if needed) and upload ``files`` under ``prefix``; the keys.

        Uploaded straight to moto (no latency, no faults): filling is setup, not the lesson.
        """
        s3 = self.client(direct=True)
        self.make_bucket(bucket, s3)
        keys = []
        for f in files:
            f = Path(f)
            rel = f.relative_to(root).as_posix() if root else f.name
            key = f"{prefix.rstrip('/')}/{rel}" if prefix else rel
            s3.upload_file(str(f), bucket, key)
            keys.append(key)
        return keys

    def make_bucket(self, bucket: str, s3=None) -> None:
        s3 = s3 or self.client(direct=True)
        try:
            s3.create_bucket(Bucket=bucket)
        except s3.exceptions.BucketAlreadyOwnedByYou:
            pass

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


def s3_client(endpoint_url: str, *, retries: str = "standard", max_attempts: int = 5,
              read_timeout: float = 10.0, connect_timeout: float = 2.0,
              max_pool_connections: int = 16, access_key: str = ACCESS_KEY,
              secret_key: str = SECRET_KEY):
    """A boto3 S3 client on ``endpoint_url`` (chapter 14).

    ``retries`` is botocore's retry mode (``legacy``, ``standard``, ``adaptive``: standard
    plus a client-side rate limiter that slows down after throttling), ``max_attempts``
    counts the first try; ``read_timeout`` bounds the wait for the first byte.
    """
    import boto3
    from botocore.config import Config

    # total_max_attempts: botocore's Config reads a bare "max_attempts" as retries after the
    # first try (the AWS config file's max_attempts counts the first try, as here)
    cfg = Config(retries={"mode": retries, "total_max_attempts": max_attempts},
                 read_timeout=read_timeout, connect_timeout=connect_timeout,
                 max_pool_connections=max_pool_connections, s3={"addressing_style": "path"})
    return boto3.client("s3", endpoint_url=endpoint_url, aws_access_key_id=access_key,
                        aws_secret_access_key=secret_key, region_name=REGION, config=cfg)


def s3_store(*, latency_s: float = 0.0, bandwidth: float | None = None,
             faults=()) -> ObjectStore:
    """Start an S3-compatible store on 127.0.0.1 behind a fault layer (chapter 14).

    Args:
        latency_s: seconds before every answer's first byte (a far region).
        bandwidth: bytes/s per connection (``None``: as fast as loopback goes).
        faults: :class:`~labkit.Fault` s matched against ``bucket/key`` (503 SlowDown, 500,
            ``drop`` = reset mid-object, ``stall`` = slow first byte).

    Returns:
        A running :class:`ObjectStore`; use it in a ``with`` block so it always stops::

            with lk.objstore.s3_store(latency_s=0.02) as store:
                store.put_files("shards", files)
                s3 = store.client()
    """
    return ObjectStore(latency_s=latency_s, bandwidth=bandwidth, faults=faults)
