"""``lk.remote.serve``: a folder over HTTP, or an S3 store, on loopback (chapters 06, 07, 14).

``serve(s3=True)``: moto's S3 server behind the fault layer, which also rejects wrong keys."""

from __future__ import annotations

import http.client
import io
import os
import re
import socket
import struct
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import NamedTuple

import psutil

from ..loading.processes import stop_processes
from .launch import free_port
from .leftovers import MosaicShm, litdata_contained, scoped, start_ray
from .server import LoopbackHandler, LoopbackService, Server, check_pace

ACCESS_KEY, SECRET_KEY, REGION = "labkit", "labkit-secret", "us-east-1"

_S3_CODES = {503: "SlowDown", 500: "InternalError", 403: "AccessDenied", 404: "NoSuchKey",
             429: "SlowDown"}
_S3_MESSAGES = {"SlowDown": "Please reduce your request rate.",
                "InternalError": "We encountered an internal error. Please try again.",
                "InvalidAccessKeyId": "The AWS Access Key Id you provided does not exist "
                                      "in our records."}
_CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/|X-Amz-Credential=([^%/&]+)")
_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "te", "upgrade"}


def s3_error_xml(code: str, path: str) -> bytes:
    """An S3 error body (what boto3 turns into ``ClientError``), naming bucket and key."""
    bucket, _, key = path.partition("/")
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
            f"<Message>{_S3_MESSAGES.get(code, code)}</Message><BucketName>{bucket}"
            f"</BucketName><Key>{key}</Key><RequestId>labkit-fault</RequestId></Error>").encode()


class Shards(NamedTuple):
    """Tar shards put in a bucket by :meth:`ObjectStore.put_tar_shards`."""

    bucket: str
    keys: tuple[str, ...]
    nbytes: tuple[int, ...]   # each object's size
    counts: tuple[int, ...]   # samples per shard, in key order


class _S3Handler(LoopbackHandler):
    server_version = "labkit-s3proxy"

    def setup(self):
        super().setup()
        # headers, body in separate writes: Nagle + delayed ACK would add ~40 ms an answer
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    do_PUT = do_POST = do_DELETE = LoopbackHandler.do_GET

    def read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else b""
        parts = []
        while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
            parts.append(self.rfile.read(size))
            self.rfile.readline()
        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
            pass  # the trailer
        return b"".join(parts)

    def error(self, status: int, path: str, code: str | None = None) -> int:
        code = code or _S3_CODES.get(status, "InternalError")
        return self.send_data(status, "application/xml", s3_error_xml(code, path))

    def upstream(self, body: bytes, headers: dict) -> http.client.HTTPResponse:
        local = self.service.connections   # one upstream connection per thread (keep-alive)
        for attempt in (1, 2):
            if getattr(local, "conn", None) is None:
                local.conn = http.client.HTTPConnection("127.0.0.1", self.service.moto_port,
                                                        timeout=60)
            try:
                local.conn.request(self.command, self.path, body=body, headers=headers)
                return local.conn.getresponse()
            except (OSError, http.client.HTTPException):  # a stale keep-alive: once more
                local.conn = None
                if attempt == 2:
                    raise

    def respond(self, path, body, fault):
        m = _CREDENTIAL.search(self.headers.get("Authorization", "") or self.path)
        if m and (m.group(1) or m.group(2)) != ACCESS_KEY:
            return self.error(403, path, "InvalidAccessKeyId"), 0
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
        if body or self.command in ("PUT", "POST"):
            headers["Content-Length"] = str(len(body))
        resp = self.upstream(body, headers)
        self.send_response(resp.status, resp.reason)
        for k, v in resp.getheaders():
            if k.lower() not in _HOP | {"server", "date"}:
                self.send_header(k, v)
        self.end_headers()
        drop = fault is not None and fault.kind == "drop" and self.command == "GET"
        sent = self.paced_copy(resp.read, fault.after_bytes if drop else None)
        if drop:
            resp.read()  # drain the upstream answer so its connection can be reused
            self.close_connection = True
            with suppress(OSError):  # close with a TCP RST (SO_LINGER 0): reset mid-object
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
        return resp.status, sent


class ObjectStore(LoopbackService):
    """A running loopback S3 store: ``endpoint_url`` (faults), ``direct_url`` (moto, filling)."""

    def __init__(self, *, latency_s: float = 0.0, bandwidth: float | None = None, faults=(),
                 start_timeout_s: float = 30.0):
        self.latency_s, self.bandwidth = check_pace(latency_s, bandwidth)
        self.connections = threading.local()
        self.moto_port = free_port()
        env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY,
                   MOTO_ALLOW_NONEXISTENT_REGION="true")
        self._err = tempfile.TemporaryFile()   # werkzeug logs every request: a file, no pipe
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.moto_port)],
            stdout=subprocess.DEVNULL, stderr=self._err, env=env)
        self.pid = self._proc.pid
        self.direct_url = f"http://127.0.0.1:{self.moto_port}"
        try:
            self._wait_ready(start_timeout_s)
        except BaseException:
            self._stop_moto()
            raise
        self._start(_S3Handler, faults, "lk.s3proxy")
        self.endpoint_url = self.url

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                self._err.seek(0)
                err = self._err.read().decode(errors="replace")[-800:]
                raise RuntimeError(f"moto's S3 server exited at start (code "
                                   f"{self._proc.returncode}): {err}")
            try:
                with socket.create_connection(("127.0.0.1", self.moto_port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise TimeoutError(f"moto's S3 server did not listen on {self.direct_url} "
                           f"within {timeout_s:g} s")

    def configure(self, *, latency_s: float | None = None, bandwidth: float | None | str = "keep",
                  faults=None) -> None:
        """Change latency, bandwidth (``None``: unlimited) or the faults (counters restart)."""
        self.latency_s, self.bandwidth = check_pace(
            self.latency_s if latency_s is None else float(latency_s),
            self.bandwidth if bandwidth == "keep" else bandwidth)
        if faults is not None:
            self.set_faults(faults)

    def settings(self) -> dict:
        """The fault layer's settings in force (record them with every result)."""
        return {"latency_ms": round(self.latency_s * 1e3, 3),
                "bandwidth_MB_per_s": None if self.bandwidth is None else self.bandwidth / 1e6,
                "faults": [f"{f} on {f.method or 'any'} {f.path or '*'}"
                           + (f" (requests {list(f.nth)})" if f.nth else "")
                           for f in self.faults]}

    def client(self, *, direct: bool = False, max_pool_connections: int = 16):
        """A boto3 S3 client on the store, botocore's standard retries (5 attempts)."""
        import boto3
        from botocore.config import Config

        cfg = Config(retries={"mode": "standard", "total_max_attempts": 5},
                     max_pool_connections=max_pool_connections, s3={"addressing_style": "path"})
        return boto3.client("s3", endpoint_url=self.direct_url if direct else self.endpoint_url,
                            aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
                            region_name=REGION, config=cfg)

    def storage_options(self) -> dict:
        """fsspec/s3fs options for ``s3://`` URLs (``datasets``, webdataset, pandas)."""
        return {"key": ACCESS_KEY, "secret": SECRET_KEY,
                "client_kwargs": {"endpoint_url": self.endpoint_url, "region_name": REGION},
                "config_kwargs": {"s3": {"addressing_style": "path"}}}

    def arrow_filesystem(self):
        """pyarrow's own S3 client (the AWS C++ SDK), endpoint overridden to the store."""
        from pyarrow import fs

        return fs.S3FileSystem(access_key=ACCESS_KEY, secret_key=SECRET_KEY, region=REGION,
                               scheme="http", endpoint_override=self.url.split("://", 1)[1],
                               retry_strategy=fs.AwsStandardS3RetryStrategy(max_attempts=5))

    @contextmanager
    def cleanup(self, system: str, **options):
        """What MosaicML Streaming, LitData or Ray leave behind, cleaned up after the block
        (chapter 14b); ``"mosaic"`` yields a ``MosaicShm`` to track datasets, ``"ray"`` ray."""
        if system == "mosaic":
            shm = MosaicShm()
            env = {"S3_ENDPOINT_URL": self.endpoint_url, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                   "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_DEFAULT_REGION": REGION}
            with scoped(os.environ, {**env, **options}):
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
        with suppress(s3.exceptions.BucketAlreadyOwnedByYou):
            s3.create_bucket(Bucket=bucket)

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
        """``rows`` (column 0 the id) as tar shards of ``{id:08d}.f32`` members in ``bucket``."""
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

    def _stop_moto(self) -> None:
        if self._proc.poll() is None:
            with suppress(psutil.NoSuchProcess):
                stop_processes([psutil.Process(self._proc.pid)])
        self._proc.wait(timeout=10)
        self._err.close()

    def stop(self) -> None:
        """Stop the fault layer and the server process; idempotent."""
        super().stop()
        self._stop_moto()

    def __repr__(self) -> str:
        return f"<lk.remote.serve(s3=True) at {self.url} (moto pid {self.pid})>"


def serve(folder=None, *, s3: bool = False, latency_s: float = 0.0,
          bandwidth: float | None = None, faults=()) -> Server | ObjectStore:
    """A folder (or ``Fixture``) over HTTP (chapter 06), or with ``s3=True`` an S3 store
    (chapter 14), behind a fault layer: ``with lk.remote.serve(fx) as srv: ...``."""
    if s3 != (folder is None):
        raise ValueError("serve(folder) serves a folder, serve(s3=True) an S3 store: "
                         f"give one, not folder={folder!r} and s3={s3}")
    if s3:
        return ObjectStore(latency_s=latency_s, bandwidth=bandwidth, faults=faults)
    return Server(folder, latency_s=latency_s, bandwidth=bandwidth, faults=faults)
