"""A loopback HTTP server over a folder: a remote store taught offline (chapters 06, 07, 14).

:func:`serve` serves one folder on ``127.0.0.1`` with ``GET``/``HEAD`` and single byte ranges,
slowed down (``latency_s``, ``bandwidth``) and with deterministic :class:`Fault` s, and logs
every request so a chapter can show what its reader did.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import re
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote, unquote, urlparse

from ..records.table import text_table

#: Bytes written per ``send``: small enough that a bandwidth limit paces smoothly.
CHUNK = 16 * 1024

FAULT_KINDS = ("status", "drop", "stall")


@dataclass(frozen=True)
class Fault:
    """One injected fault, applied to the requests it matches (chapter 06b).

    ``kind``: ``"status"`` (answer ``code``, no body), ``"drop"`` (close after ``after_bytes``
    of the body) or ``"stall"`` (send nothing for ``stall_s``, then close). ``path`` is a glob
    of the path without its ``/`` and ``method`` a method (``None``: any); ``nth``: which
    matching requests fail, counting from 1 (``None``: all of them).
    """

    kind: str
    path: str | None = None
    nth: tuple[int, ...] | None = None
    method: str | None = None
    code: int = 503
    after_bytes: int = 0
    stall_s: float = 30.0

    def __post_init__(self):
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"Fault kind={self.kind!r}: choose one of {', '.join(FAULT_KINDS)}")
        if self.nth is not None:
            object.__setattr__(self, "nth", tuple(int(n) for n in (
                (self.nth,) if isinstance(self.nth, int) else self.nth)))
        if self.kind == "status" and not 400 <= self.code <= 599:
            raise ValueError(f"Fault code={self.code}: an error status, 400-599")

    def matches(self, path: str, method: str = "GET") -> bool:
        return ((self.path is None or fnmatch.fnmatchcase(path, self.path))
                and (self.method is None or self.method.upper() == method))

    def __str__(self) -> str:
        return {"status": f"status {self.code}", "drop": f"drop after {self.after_bytes} B",
                "stall": f"stall {self.stall_s:g} s"}[self.kind]


@dataclass(frozen=True)
class Request:
    """One logged request: what was asked, what was answered, which fault (if any) hit."""

    n: int              # 1-based, in arrival order
    method: str
    path: str
    range: str | None   # the Range header as sent
    status: int | None  # None: the client hung up before a status was sent
    bytes_sent: int     # body bytes actually written
    fault: str | None
    seconds: float


_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


def parse_range(header: str | None, size: int) -> tuple[int, int] | None | str:
    """``(start, stop)`` (stop exclusive) for one ``bytes=`` range, ``None`` for no/ignored
    header, ``"unsatisfiable"`` for a range outside the file (answered 416)."""
    if not header:
        return None
    m = _RANGE.match(header.strip())
    if not m or (not m.group(1) and not m.group(2)):
        return None  # multi-range or malformed: RFC 9110 lets a server ignore it (send 200)
    first, last = m.group(1), m.group(2)
    if not first:  # suffix: the last N bytes
        n = int(last)
        return (max(0, size - n), size) if n > 0 and size > 0 else "unsatisfiable"
    start = int(first)
    stop = size if not last else min(size, int(last) + 1)
    if start >= size or stop <= start:
        return "unsatisfiable"
    return start, stop


def paced_copy(read, write, bandwidth: float | None, wait, limit: int | None = None
               ) -> tuple[int, bool]:
    """Copy ``read(n)`` chunks to ``write`` at ``bandwidth`` bytes/s (None: as fast as it goes),
    up to ``limit`` bytes; ``wait(s)`` sleeps, False when stopping. Returns ``(sent, ok)``."""
    sent, t0 = 0, time.perf_counter()
    while limit is None or sent < limit:
        chunk = read(CHUNK if limit is None else min(CHUNK, limit - sent))
        if not chunk:
            break
        if bandwidth:
            due = (sent + len(chunk)) / bandwidth - (time.perf_counter() - t0)
            if not wait(due):
                return sent, False
        try:
            write(chunk)
        except OSError:  # the client hung up
            return sent, False
        sent += len(chunk)
    return sent, True


class LoopbackService:
    """A thread serving 127.0.0.1 on a free port, its faults and request log (the file server,
    the S3 fault layer)."""

    def _start(self, handler_factory, faults, name: str) -> None:
        self._log: list[Request] = []
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._in_flight = 0
        self._count = 0
        self.set_faults(faults)
        self._stopping = threading.Event()
        self._httpd = _HTTPServer(("127.0.0.1", 0), handler_factory(self))
        self._httpd.daemon_threads = True  # a stuck client never keeps the process alive
        self.port = self._httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={
            "poll_interval": 0.05}, name=f"{name}:{self.port}", daemon=True)
        self._thread.start()

    def set_faults(self, faults) -> None:
        """Replace the fault list (dicts or :class:`Fault`); its counters start again."""
        faults = [f if isinstance(f, Fault) else Fault(**f) for f in faults]
        with self._lock:
            self.faults, self._matched = faults, [0] * len(faults)

    def _next(self, path: str, method: str) -> tuple[int, Fault | None]:
        """Number this request and pick the first fault that applies (deterministic)."""
        with self._lock:
            self._count += 1
            self._in_flight += 1
            hit = None
            for i, f in enumerate(self.faults):
                if f.matches(path, method):
                    self._matched[i] += 1
                    if hit is None and (f.nth is None or self._matched[i] in f.nth):
                        hit = f
            return self._count, hit

    def _record(self, req: Request) -> None:
        with self._lock:
            self._log.append(req)
            self._in_flight -= 1
            self._idle.notify_all()

    @property
    def log(self) -> list[Request]:
        """Requests answered so far, in arrival order (waits up to 2 s for those in flight)."""
        with self._idle:
            self._idle.wait_for(lambda: self._in_flight == 0, timeout=2.0)
            return sorted(self._log, key=lambda r: r.n)

    def stop(self) -> None:
        """Stop serving and close the socket; idempotent."""
        if self._stopping.is_set():
            return
        self._stopping.set()  # wakes stalls and paced sends
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


class Server(LoopbackService):
    """A running loopback server (see :func:`serve`): ``url``, ``log``, ``urls(pattern)``."""

    def __init__(self, folder, latency_s: float = 0.0, bandwidth: float | None = None,
                 faults=()):
        self.folder = Path(getattr(folder, "path", folder)).resolve()
        if not self.folder.is_dir():
            raise FileNotFoundError(f"{self.folder}: no such folder to serve")
        if latency_s < 0 or (bandwidth is not None and bandwidth <= 0):
            raise ValueError(f"latency_s={latency_s} must be >= 0 and bandwidth={bandwidth} > 0")
        self.latency_s, self.bandwidth = float(latency_s), bandwidth
        self._start(_handler_for, faults, "lk.remote.serve")

    def url_for(self, name) -> str:
        """The URL of a file in the folder (a name relative to it, or a path inside it)."""
        p = Path(name)
        rel = p.resolve().relative_to(self.folder) if p.is_absolute() else p
        return f"{self.url}/{quote(rel.as_posix())}"

    def urls(self, pattern: str = "*") -> list[str]:
        """URLs of the folder's files matching a glob, sorted."""
        return [self.url_for(p.relative_to(self.folder))
                for p in sorted(self.folder.glob(pattern)) if p.is_file()]

    def table(self, last: int | None = None) -> str:
        """The request log as a fixed-width table (deterministic apart from ``seconds``)."""
        return text_table(
            {"n": ">4", "method": "<6", "path": "<28", "range": "<18", "status": ">6",
             "bytes": ">10", "fault": "<"},
            [[r.n, r.method, r.path, r.range or "-", r.status or "-", r.bytes_sent, r.fault]
             for r in self.log[-last if last else None:]], rule=True)

    def __repr__(self) -> str:
        return f"<lk.remote.serve {self.folder.name!r} at {self.url}, {len(self.log)} requests>"


class _HTTPServer(ThreadingHTTPServer):
    allow_reuse_address = True
    block_on_close = False  # shutdown does not wait for handler threads (stalls end on their own)

    def handle_error(self, request, client_address):
        pass  # a client hanging up mid-body is what the faults are for; no tracebacks


def _handler_for(server: Server):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 30.0  # an idle keep-alive client cannot hold a thread forever
        server_version = "labkit-serve"

        def log_message(self, *args):
            pass  # the request log replaces stderr noise

        def do_HEAD(self):
            self._answer(body=False)

        def do_GET(self):
            self._answer(body=True)

        def _answer(self, body: bool):
            t0 = time.perf_counter()
            path = unquote(urlparse(self.path).path).lstrip("/")
            n, fault = server._next(path, self.command)
            rng = self.headers.get("Range")
            status, sent, note = None, 0, ""
            try:
                status, sent, note = self._respond(path, rng, body, fault)
            except OSError as e:  # the client hung up mid-answer: still a request to log
                self.close_connection = True
                note = f"client gone ({type(e).__name__})"
            finally:  # always recorded: the log waits for requests in flight
                server._record(Request(n, self.command, path, rng, status, sent,
                                       str(fault) if fault else note,
                                       time.perf_counter() - t0))

        def _wait(self, seconds: float) -> bool:
            """Sleep unless the server stops first; False if it stopped."""
            return not server._stopping.wait(seconds) if seconds > 0 else True

        def _error(self, code: int, message: str) -> None:
            data = message.encode()
            self.send_response(code)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _respond(self, path, rng, body, fault):
            if not self._wait(server.latency_s):
                self.close_connection = True
                return 0, 0, "server stopped"
            if fault is not None and fault.kind == "stall":
                self._wait(fault.stall_s)
                self.close_connection = True
                return 0, 0, None
            if fault is not None and fault.kind == "status":
                self._error(fault.code, f"injected fault: status {fault.code}\n")
                return fault.code, 0, None
            file = (server.folder / path).resolve()
            if server.folder not in file.parents or not file.is_file():
                self._error(404, f"{path}: not found\n")
                return 404, 0, None
            size = file.stat().st_size
            span = parse_range(rng, size)
            if span == "unsatisfiable":
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return 416, 0, None
            start, stop = span if span else (0, size)
            status = 206 if span else 200
            self.send_response(status)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("Content-Length", str(stop - start))
            if span:
                self.send_header("Content-Range", f"bytes {start}-{stop - 1}/{size}")
            self.end_headers()
            if not body:
                return status, 0, None
            limit = stop - start
            if fault is not None and fault.kind == "drop":
                limit = min(limit, fault.after_bytes)
            sent = self._send_file(file, start, limit)
            if fault is not None and fault.kind == "drop":
                self.close_connection = True
            return status, sent, None

        def _send_file(self, file: Path, start: int, limit: int) -> int:
            with open(file, "rb") as f:
                f.seek(start)
                sent, ok = paced_copy(f.read, self.wfile.write, server.bandwidth, self._wait,
                                      limit)
            if not ok or sent < limit:
                self.close_connection = True
            with contextlib.suppress(OSError):
                self.wfile.flush()
            return sent

    return Handler


def serve(folder: str | os.PathLike, *, latency_s: float = 0.0, bandwidth: float | None = None,
          faults=()) -> Server:
    """Serve a folder (or a :class:`~labkit.Fixture`) over HTTP on 127.0.0.1 (chapter 06).

    ``latency_s`` comes before every response's first byte, ``bandwidth`` is bytes/s per
    connection, ``faults`` are :class:`Fault` s (or dicts); the first matching one applies.
    Use the :class:`Server` in a ``with`` block: ``with lk.remote.serve(fx) as srv: ...``.
    """
    return Server(folder, latency_s=latency_s, bandwidth=bandwidth, faults=faults)
