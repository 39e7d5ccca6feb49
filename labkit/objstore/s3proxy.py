"""The fault and latency layer in front of the loopback S3 store (chapter 14).

:class:`FaultProxy` listens on ``127.0.0.1`` and forwards every request, unchanged, to moto's
S3 server, then delays, paces or breaks the answer the way a far, busy object store does:
``latency_s`` before the first byte, ``bandwidth`` bytes/s per connection, and
``lk.remote.serve``'s :class:`~labkit.remote.server.Fault` s in S3's dialect: a ``status``
fault answers S3's XML error naming bucket and key (503 ``SlowDown``, 500), ``drop`` resets
the connection mid-object, ``stall`` holds the first byte. It also checks the access key id
(moto does not): wrong credentials get 403 ``InvalidAccessKeyId``. Every request is logged.
"""

from __future__ import annotations

import http.client
import re
import socket
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler
from urllib.parse import unquote, urlparse

from ..remote.server import LoopbackService, Request, paced_copy

_S3_CODES = {503: "SlowDown", 500: "InternalError", 403: "AccessDenied", 404: "NoSuchKey",
             429: "SlowDown"}
_S3_MESSAGES = {"SlowDown": "Please reduce your request rate.",
                "InternalError": "We encountered an internal error. Please try again.",
                "InvalidAccessKeyId": "The AWS Access Key Id you provided does not exist "
                                      "in our records."}
_CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/|X-Amz-Credential=([^%/&]+)")
_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "te", "upgrade"}


def s3_error_xml(code: str, path: str, message: str | None = None) -> bytes:
    """An S3 error body (what boto3 turns into ``ClientError``), naming bucket and key."""
    bucket, _, key = path.partition("/")
    msg = message or _S3_MESSAGES.get(code, code)
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
            f"<Message>{msg}</Message><BucketName>{bucket}</BucketName><Key>{key}</Key>"
            f"<RequestId>labkit-fault</RequestId></Error>").encode()


class FaultProxy(LoopbackService):
    """A running proxy at ``url``; its settings can change while it runs (:meth:`configure`)."""

    def __init__(self, upstream: tuple[str, int], *, latency_s: float = 0.0,
                 bandwidth: float | None = None, faults=(), access_key: str | None = None,
                 timeout_s: float = 30.0):
        self.upstream = upstream
        self.access_key = access_key
        self.timeout_s = timeout_s
        self.configure(latency_s=latency_s, bandwidth=bandwidth)
        self._start(_handler_for, faults, "lk.s3proxy")

    def configure(self, *, latency_s: float | None = None, bandwidth: float | None | str = "keep",
                  faults=None) -> None:
        """Change latency (s before the first byte), bandwidth (bytes/s per connection,
        ``None`` = unlimited) or the fault list; fault counters restart with a new list."""
        if latency_s is not None:
            if latency_s < 0:
                raise ValueError(f"latency_s={latency_s} must be >= 0")
            self.latency_s = float(latency_s)
        if bandwidth != "keep":
            if bandwidth is not None and bandwidth <= 0:
                raise ValueError(f"bandwidth={bandwidth} must be > 0 bytes/s (or None)")
            self.bandwidth = bandwidth
        if faults is not None:
            self.set_faults(faults)

    def settings(self) -> dict:
        """The settings in force, as recorded with results."""
        return {"latency_ms": round(self.latency_s * 1e3, 3),
                "bandwidth_MB_per_s": None if self.bandwidth is None else self.bandwidth / 1e6,
                "faults": [f"{f} on {f.method or 'any'} {f.path or '*'}"
                           + (f" (requests {list(f.nth)})" if f.nth else "")
                           for f in self.faults]}


def _handler_for(proxy: FaultProxy):
    local = threading.local()  # one upstream connection per handler thread (keep-alive)

    def upstream() -> http.client.HTTPConnection:
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = http.client.HTTPConnection(*proxy.upstream, timeout=60)
        return conn

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = proxy.timeout_s
        server_version = "labkit-s3proxy"

        def log_message(self, *args):
            pass

        def setup(self):
            super().setup()
            # headers and body leave in separate writes: without NODELAY, Nagle's algorithm
            # and the client's delayed ACK add ~40 ms to every answer
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def do_GET(self):
            self._proxy()

        do_HEAD = do_PUT = do_POST = do_DELETE = do_GET

        def _proxy(self):
            t0 = time.perf_counter()
            path = unquote(urlparse(self.path).path).lstrip("/")
            n, fault = proxy._next(path, self.command)
            status, sent, note = None, 0, ""
            try:
                body = self._read_body()
                status, sent, note = self._respond(path, body, fault)
            except OSError as e:
                self.close_connection = True
                note = f"client gone ({type(e).__name__})"
            finally:
                proxy._record(Request(n, self.command, path, self.headers.get("Range"), status,
                                      sent, str(fault) if fault else note,
                                      time.perf_counter() - t0))

        def _read_body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                parts = []
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                            pass
                        return b"".join(parts)
                    parts.append(self.rfile.read(size))
                    self.rfile.readline()
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else b""

        def _wait(self, seconds: float) -> bool:
            return not proxy._stopping.wait(seconds) if seconds > 0 else True

        def _error(self, status: int, code: str, path: str) -> tuple:
            data = s3_error_xml(code, path) if self.command != "HEAD" else b""
            self.send_response(status)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return status, 0, None

        def _key_id(self) -> str | None:
            m = _CREDENTIAL.search(self.headers.get("Authorization", "") or self.path)
            return (m.group(1) or m.group(2)) if m else None

        def _respond(self, path, body, fault):
            if not self._wait(proxy.latency_s):
                self.close_connection = True
                return None, 0, "proxy stopped"
            if fault is not None and fault.kind == "stall":
                self._wait(fault.stall_s)
                self.close_connection = True
                return None, 0, None
            if fault is not None and fault.kind == "status":
                return self._error(fault.code, _S3_CODES.get(fault.code, "InternalError"), path)
            key_id = self._key_id()
            if proxy.access_key and key_id is not None and key_id != proxy.access_key:
                return self._error(403, "InvalidAccessKeyId", path)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
            if body or self.command in ("PUT", "POST"):
                headers["Content-Length"] = str(len(body))
            try:
                conn = upstream()
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
            except (OSError, http.client.HTTPException):  # a stale keep-alive: once more
                local.conn = None
                conn = upstream()
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
            self.send_response(resp.status, resp.reason)
            for k, v in resp.getheaders():
                if k.lower() not in _HOP and k.lower() not in ("server", "date"):
                    self.send_header(k, v)
            self.end_headers()
            limit = None
            if fault is not None and fault.kind == "drop" and self.command == "GET":
                limit = fault.after_bytes
            sent = self._stream(resp, limit)
            if limit is not None:
                self._reset()
            return resp.status, sent, None

        def _stream(self, resp, limit: int | None) -> int:
            sent, ok = paced_copy(resp.read, self.wfile.write, proxy.bandwidth, self._wait,
                                  limit)
            if not ok:
                self.close_connection = True
            if limit is not None:
                resp.read()  # drain the upstream answer so its connection can be reused
            try:
                self.wfile.flush()
            except OSError:
                self.close_connection = True
            return sent

        def _reset(self) -> None:
            """Close with a TCP RST (SO_LINGER 0): a connection reset mid-object."""
            self.close_connection = True
            try:
                self.wfile.flush()
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
            except OSError:
                pass

    return Handler
