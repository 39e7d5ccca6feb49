"""A loopback HTTP server over a folder: a remote store taught offline (chapters 06, 07, 14).

GET/HEAD, single byte ranges, latency, bandwidth, faults, a request log; .stores reuses it."""

from __future__ import annotations

import contextlib
import fnmatch
import re
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote, unquote, urlparse

CHUNK = 16 * 1024  # bytes per send: small enough that a bandwidth limit paces smoothly
FAULT_KINDS = ("status", "drop", "stall")


@dataclass(frozen=True)
class Fault:
    """One injected fault (chapter 06b): ``status`` answers ``code``, ``drop`` closes after
    ``after_bytes``, ``stall`` waits ``stall_s``; on requests whose path (no leading ``/``)
    matches the glob ``path`` and ``method`` (``None``: any), the ``nth`` (from 1; None: all)."""

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
    status: int | None  # None: no status was sent (a stall, a hang-up, a stop)
    bytes_sent: int     # body bytes actually written
    fault: str | None
    seconds: float


_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


def parse_range(header: str | None, size: int) -> tuple[int, int] | None | str:
    """``(start, stop)`` for one ``bytes=`` range, ``None`` (ignored) or ``"unsatisfiable"``."""
    m = _RANGE.match(header.strip()) if header else None
    if not m or (not m.group(1) and not m.group(2)):
        return None  # multi-range or malformed: RFC 9110 lets a server ignore it (send 200)
    first, last = m.group(1), m.group(2)
    if not first:  # suffix: the last N bytes
        n = int(last)
        return (max(0, size - n), size) if n > 0 and size > 0 else "unsatisfiable"
    start, stop = int(first), size if not last else min(size, int(last) + 1)
    return "unsatisfiable" if start >= size or stop <= start else (start, stop)


def check_pace(latency_s: float, bandwidth: float | None) -> tuple[float, float | None]:
    """``(latency_s, bandwidth)``, or a ValueError for a latency < 0 or a bandwidth <= 0."""
    if latency_s < 0:
        raise ValueError(f"latency_s={latency_s} must be >= 0")
    if bandwidth is not None and bandwidth <= 0:
        raise ValueError(f"bandwidth={bandwidth} must be > 0 bytes/s (or None)")
    return float(latency_s), bandwidth


class LoopbackService:
    """A thread serving 127.0.0.1 on a free port, its faults and request log."""

    def _start(self, handler: type, faults, name: str) -> None:
        self._log: list[Request] = []
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._in_flight = self._count = 0
        self.set_faults(faults)
        self._stopping = threading.Event()
        self._httpd = _HTTPServer(("127.0.0.1", 0), type("Handler", (handler,), {"service": self}))
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

    def _wait(self, seconds: float) -> bool:
        return not self._stopping.wait(seconds) if seconds > 0 else True

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


class _HTTPServer(ThreadingHTTPServer):
    allow_reuse_address = True
    block_on_close = False  # shutdown does not wait for handler threads (stalls end on their own)

    def handle_error(self, request, client_address):
        pass  # a client hanging up mid-body is what the faults are for; no tracebacks


class LoopbackHandler(BaseHTTPRequestHandler):
    """A request: delayed, faulted or ``respond(path, body, fault)`` -> (status, sent), logged."""

    protocol_version = "HTTP/1.1"
    timeout = 30.0  # an idle keep-alive client cannot hold a thread forever
    service: LoopbackService

    def log_message(self, *args):
        pass  # the request log replaces stderr noise

    def do_GET(self):
        t0, svc = time.perf_counter(), self.service
        path = unquote(urlparse(self.path).path).lstrip("/")
        n, fault = svc._next(path, self.command)
        status, sent, note = None, 0, None
        try:
            body = self.read_body()
            if not svc._wait(svc.latency_s):
                self.close_connection, note = True, "stopped"
            elif fault is not None and fault.kind == "stall":
                svc._wait(fault.stall_s)
                self.close_connection = True
            elif fault is not None and fault.kind == "status":
                status = self.error(fault.code, path)
            else:
                status, sent = self.respond(path, body, fault)
        except OSError as e:  # the client hung up mid-answer: still a request to log
            self.close_connection = True
            note = f"client gone ({type(e).__name__})"
        finally:  # always recorded: the log waits for requests in flight
            svc._record(Request(n, self.command, path, self.headers.get("Range"), status, sent,
                               str(fault) if fault else note, time.perf_counter() - t0))

    do_HEAD = do_GET

    def read_body(self) -> bytes:
        return b""

    def send_data(self, status: int, content_type: str, data: bytes) -> int:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        return status

    def paced_copy(self, read, limit: int | None = None) -> int:
        """``read(n)`` chunks at the service's bandwidth, up to ``limit``: the bytes sent."""
        sent, t0, bandwidth = 0, time.perf_counter(), self.service.bandwidth
        while limit is None or sent < limit:
            chunk = read(CHUNK if limit is None else min(CHUNK, limit - sent))
            if not chunk:
                break
            due = (sent + len(chunk)) / bandwidth - (time.perf_counter() - t0) if bandwidth else 0
            try:
                if not self.service._wait(due):
                    raise OSError("stopped")
                self.wfile.write(chunk)
            except OSError:  # stopped, or the client hung up
                self.close_connection = True
                return sent
            sent += len(chunk)
        with contextlib.suppress(OSError):
            self.wfile.flush()
        return sent


class _FileHandler(LoopbackHandler):
    server_version = "labkit-serve"

    def error(self, status: int, path: str, what: str | None = None) -> int:
        what = what or f"injected fault: status {status}"
        return self.send_data(status, "text/plain", f"{what}\n".encode())

    def respond(self, path, body, fault):
        folder = self.service.folder
        file = (folder / path).resolve()
        if folder not in file.parents or not file.is_file():
            return self.error(404, path, f"{path}: not found"), 0
        size = file.stat().st_size
        span = parse_range(self.headers.get("Range"), size)
        if span == "unsatisfiable":
            self.send_response(416)
            self.send_header("Content-Range", f"bytes */{size}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return 416, 0
        start, stop = span or (0, size)
        status = 206 if span else 200
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(stop - start))
        if span:
            self.send_header("Content-Range", f"bytes {start}-{stop - 1}/{size}")
        self.end_headers()
        if self.command == "HEAD":
            return status, 0
        limit = stop - start
        if fault is not None and fault.kind == "drop":
            limit = min(limit, fault.after_bytes)
            self.close_connection = True
        with open(file, "rb") as f:
            f.seek(start)
            sent = self.paced_copy(f.read, limit)
        self.close_connection |= sent < limit
        return status, sent


class Server(LoopbackService):
    """A running loopback server over a folder (``lk.remote.serve(folder)``)."""

    def __init__(self, folder, latency_s: float = 0.0, bandwidth: float | None = None, faults=()):
        self.folder = Path(getattr(folder, "path", folder)).resolve()
        if not self.folder.is_dir():
            raise FileNotFoundError(f"{self.folder}: no such folder to serve")
        self.latency_s, self.bandwidth = check_pace(latency_s, bandwidth)
        self._start(_FileHandler, faults, "lk.remote.serve")

    def url_for(self, name) -> str:
        """The URL of a file in the folder (a name relative to it, or a path inside it)."""
        p = Path(name)
        rel = p.resolve().relative_to(self.folder) if p.is_absolute() else p
        return f"{self.url}/{quote(rel.as_posix())}"

    def urls(self, pattern: str = "*") -> list[str]:
        """URLs of the folder's files matching a glob, sorted."""
        return [self.url_for(p.relative_to(self.folder))
                for p in sorted(self.folder.glob(pattern)) if p.is_file()]

    def __repr__(self) -> str:
        return f"<lk.remote.serve {self.folder.name!r} at {self.url}, {len(self.log)} requests>"
