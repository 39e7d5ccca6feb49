"""lk.remote.serve: a loopback HTTP server with ranges, latency, bandwidth and injected faults."""

from __future__ import annotations

import http.client
import socket
import threading
import time
import urllib.error
import urllib.request

import pytest

import labkit as lk
from labkit.remote.server import parse_range

DATA = bytes(range(256)) * 400  # 102,400 bytes


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "a.bin").write_bytes(DATA)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.bin").write_bytes(b"hello")
    (tmp_path.parent / "secret.txt").write_text("outside")
    return tmp_path


def get(url, headers=None, timeout=10):
    req = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, dict(r.headers), r.read()


def raw(srv, method, path, headers=None, timeout=10):
    """One request on a fresh connection: (status, headers, body) reading exactly what came."""
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=timeout)
    try:
        conn.request(method, path, headers=headers or {})
        r = conn.getresponse()
        return r.status, dict(r.headers), r.read()
    finally:
        conn.close()


def test_serves_files_on_loopback_only(folder):
    with lk.remote.serve(folder) as srv:
        assert srv.url.startswith("http://127.0.0.1:")
        assert srv._httpd.server_address[0] == "127.0.0.1"
        status, headers, body = get(srv.url_for("a.bin"))
        assert (status, body) == (200, DATA)
        assert headers["Accept-Ranges"] == "bytes"
        assert get(srv.url_for("sub/b.bin"))[2] == b"hello"
        assert srv.urls("*.bin") == [srv.url_for("a.bin")]
        assert srv.url_for(folder / "sub" / "b.bin") == srv.url + "/sub/b.bin"


def test_head_gives_size_without_body(folder):
    with lk.remote.serve(folder) as srv:
        status, headers, body = raw(srv, "HEAD", "/a.bin")
        assert status == 200 and int(headers["Content-Length"]) == len(DATA) and body == b""


@pytest.mark.parametrize("header, span", [("bytes=0-9", (0, 10)), ("bytes=100-", (100, None)),
                                          ("bytes=-16", (len(DATA) - 16, None)),
                                          ("bytes=102390-999999", (102390, None))])
def test_range_requests_get_206_and_exact_bytes(folder, header, span):
    start, stop = span
    with lk.remote.serve(folder) as srv:
        status, headers, body = get(srv.url_for("a.bin"), {"Range": header})
        assert status == 206
        assert body == DATA[start:stop]
        end = (stop or len(DATA)) - 1
        assert headers["Content-Range"] == f"bytes {start}-{end}/{len(DATA)}"
        assert srv.log[-1].status == 206 and srv.log[-1].range == header


def test_unsatisfiable_range_is_416(folder):
    with lk.remote.serve(folder) as srv:
        with pytest.raises(urllib.error.HTTPError) as e:
            get(srv.url_for("a.bin"), {"Range": f"bytes={len(DATA)}-"})
        assert e.value.code == 416


def test_parse_range_edge_cases():
    assert parse_range(None, 10) is None
    assert parse_range("bytes=0-1,4-5", 10) is None  # multi-range: ignored, 200
    assert parse_range("bytes=-0", 10) == "unsatisfiable"
    assert parse_range("bytes=5-2", 10) == "unsatisfiable"
    assert parse_range("bytes=3-3", 10) == (3, 4)


def test_missing_file_and_escape_are_404(folder):
    with lk.remote.serve(folder) as srv:
        assert raw(srv, "GET", "/nope.tar")[0] == 404
        assert raw(srv, "GET", "/../secret.txt")[0] == 404
        assert raw(srv, "GET", "/%2e%2e/secret.txt")[0] == 404


def test_latency_delays_the_first_byte(folder):
    with lk.remote.serve(folder, latency_s=0.2) as srv:
        t0 = time.perf_counter()
        get(srv.url_for("sub/b.bin"))
        assert time.perf_counter() - t0 >= 0.2


def test_bandwidth_limit_paces_the_body(folder):
    with lk.remote.serve(folder, bandwidth=400_000) as srv:  # 102 kB at 400 kB/s: >= 0.25 s
        t0 = time.perf_counter()
        assert get(srv.url_for("a.bin"))[2] == DATA
        assert time.perf_counter() - t0 >= 0.2


def test_status_fault_on_the_nth_request_then_retry_succeeds(folder):
    faults = [lk.Fault("status", path="*.bin", nth=(1, 3), code=503)]
    with lk.remote.serve(folder, faults=faults) as srv:
        codes = [raw(srv, "GET", "/a.bin")[0] for _ in range(4)]
        assert codes == [503, 200, 503, 200]
        assert raw(srv, "GET", "/sub/b.bin")[0] == 200  # glob "*.bin" does not cross "/"
        assert [r.fault for r in srv.log[:4]] == ["status 503", None, "status 503", None]


def test_every_status_fault_when_nth_is_none(folder):
    with lk.remote.serve(folder, faults=[{"kind": "status", "code": 500}]) as srv:
        assert {raw(srv, "GET", "/a.bin")[0] for _ in range(3)} == {500}


def test_drop_fault_cuts_the_body_short(folder):
    with lk.remote.serve(folder, faults=[lk.Fault("drop", after_bytes=1000, nth=1)]) as srv:
        with pytest.raises(http.client.IncompleteRead) as e:
            raw(srv, "GET", "/a.bin")
        assert len(e.value.partial) == 1000
        assert srv.log[0].bytes_sent == 1000 and srv.log[0].fault == "drop after 1000 B"
        assert raw(srv, "GET", "/a.bin")[2] == DATA  # the second request is whole


def test_stall_fault_needs_a_client_timeout_and_stop_ends_it(folder):
    srv = lk.remote.serve(folder, faults=[lk.Fault("stall", stall_s=60)])
    try:
        t0 = time.perf_counter()
        with pytest.raises((TimeoutError, socket.timeout, urllib.error.URLError)):
            get(srv.url_for("a.bin"), timeout=0.3)
        assert time.perf_counter() - t0 < 5
    finally:
        t0 = time.perf_counter()
        srv.stop()
        assert time.perf_counter() - t0 < 5  # the stall does not hold shutdown


def test_context_manager_always_shuts_down(folder):
    with pytest.raises(RuntimeError), lk.remote.serve(folder) as srv:
        port = srv.port
        raise RuntimeError("a cell failed")
    assert not srv._thread.is_alive()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    srv.stop()  # idempotent
    assert not any(t.name == f"lk.remote.serve:{port}" for t in threading.enumerate())


def test_bad_arguments_are_clear(folder):
    with pytest.raises(FileNotFoundError, match="no-such"):
        lk.remote.serve(folder / "no-such")
    with pytest.raises(ValueError, match="kind"):
        lk.Fault("explode")
    with pytest.raises(ValueError, match="code"):
        lk.Fault("status", code=200)
    with pytest.raises(ValueError, match="latency_s"):
        lk.remote.serve(folder, latency_s=-1)
    with pytest.raises(ValueError, match="one, not"):
        lk.remote.serve(folder, s3=True)
    with pytest.raises(ValueError, match="one, not"):
        lk.remote.serve()


def test_log_counts_every_request_in_order(folder):
    with lk.remote.serve(folder) as srv:
        for _ in range(3):
            get(srv.url_for("sub/b.bin"))
        assert [r.n for r in srv.log] == [1, 2, 3]
        first = srv.log[0]
        assert (first.method, first.path, first.range, first.status) == ("GET", "sub/b.bin",
                                                                         None, 200)


def test_fault_can_target_one_method(folder):
    with lk.remote.serve(folder, faults=[lk.Fault("status", method="GET", nth=1, code=500)]) as srv:
        assert raw(srv, "HEAD", "/a.bin")[0] == 200  # HEADs are not counted
        assert raw(srv, "GET", "/a.bin")[0] == 500
        assert raw(srv, "GET", "/a.bin")[0] == 200


def test_a_client_that_hangs_up_is_still_logged(folder):
    """A reset before the answer must not leave the request "in flight" (the log waits)."""
    import struct

    with lk.remote.serve(folder, latency_s=0.3, faults=[lk.Fault("status", code=503)]) as srv:
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        s.sendall(b"GET /a.bin HTTP/1.1\r\nHost: x\r\n\r\n")
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()  # RST while the server is still in its latency
        time.sleep(0.6)
        t0 = time.monotonic()
        log = srv.log
        assert time.monotonic() - t0 < 1.0
        assert [(r.n, r.path) for r in log] == [(1, "a.bin")]
