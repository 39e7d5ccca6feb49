"""The workshop room (issue 47): ``labkit room serve`` run as a real process on loopback.

A load test (30 laptops, every chapter's record, concurrently; again with 10 % of requests
repeated: each record stored exactly once), a SIGKILL in the middle of that load (every
acknowledged record there after the restart), every bad-input case (its 4xx, nothing
stored), the page in Chromium, ``/report``, ``room submit`` and the checkpoint cell's opt-in
send. The load figures are printed and kept in ``test-artifacts/room-load.json``.
"""

from __future__ import annotations

import copy
import hashlib
import http.client
import json
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from labkit.records.checkpoint import Checkpoint
from labkit.records.room import CODE_HEADER, laptop_id, send, shareable
from labkit_tools.cli import main

REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO / "test-artifacts"
CODE = "TESTRM"
LAPTOPS = 30
CHAPTERS = sorted(p.stem for p in [*(REPO / "notebooks").glob("[0-9]*.ipynb"),
                                   *(REPO / "notebooks" / "further").glob("[0-9]*.ipynb")])
# 30 laptops on one machine: each its own loopback address (Linux routes all of 127/8)
MANY_ADDRESSES = sys.platform.startswith("linux")


class Server:
    """``labkit room serve`` on a free loopback port, its records in ``folder``."""

    def __init__(self, folder: Path, *args: str):
        cmd = [sys.executable, "-m", "labkit_tools.cli", "room", "serve", "--folder",
               str(folder), "--port", "0", "--code", CODE, *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, cwd=REPO)
        self.first = self.proc.stdout.readline()   # "room CODE: http://127.0.0.1:PORT/"
        found = re.search(r"(http://[\d.]+:(\d+))/", self.first)
        assert found, f"room serve did not start: {self.first}{self.proc.stdout.read()}"
        self.url, self.port = found.group(1), int(found.group(2))
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()  # drain

    def index(self) -> list[dict]:
        return json.loads(request(self.port, "GET", "/records")[1])

    def stop(self, sig=signal.SIGINT) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One room for the load, the bad input and submit (each counts only its own records):
    every start imports the whole CLI (6 s on 2 cores)."""
    server = Server(tmp_path_factory.mktemp("shared"), "--body-seconds", "1")
    yield server
    server.stop()


@pytest.fixture
def room(tmp_path):
    servers = []

    def start(*args, folder=None):
        servers.append(Server(folder or tmp_path / "room", *args))
        return servers[-1]

    yield start
    for s in servers:
        s.stop()


def request(port, method, path, body=b"", headers=None, source=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10,
                                      source_address=(source, 0) if source else None)
    try:
        conn.request(method, path, body, headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read().decode(), dict(resp.getheaders())
    finally:
        conn.close()


def digest(record: dict) -> str:
    return hashlib.sha256(json.dumps(record, sort_keys=True,
                                     separators=(",", ":")).encode()).hexdigest()


@pytest.fixture(scope="module")
def base() -> dict:
    """A real record of this machine, as it leaves a laptop."""
    ck = Checkpoint("00_start_here", scale="ci", records_dir="unused")
    ck.observe("page_cache.gb_per_s", 9.5, "GB/s").observe("loader.samples_per_s", 4000,
                                                            "samples/s", {"num_workers": 2})
    ck.observe("epoch.exactly_once", True, "").constraint("warm page cache")
    return shareable(ck.record())


def laptop_records(base: dict, n_laptops: int = LAPTOPS, seed: int = 0) -> list[list[dict]]:
    """Every chapter's record for each of ``n_laptops``: distinct machines and figures."""
    rng = random.Random(seed)
    out = []
    for i in range(n_laptops):
        mine = []
        for chapter in CHAPTERS:
            r = copy.deepcopy(base)
            r["chapter"] = chapter
            r["environment"]["hostname"] = f"laptop-{seed:03d}{i:07x}"
            r["environment"]["cpu"]["logical_cores"] = rng.choice([2, 4, 8, 12, 16])
            for o in r["observations"]:
                if not isinstance(o["value"], bool):
                    o["value"] = round(o["value"] * rng.lognormvariate(0, 0.6), 3)
            mine.append(r)
        out.append(mine)
    return out


def load(url: str, laptops: list[list[dict]], repeat: float = 0.0) -> dict:
    """Each laptop a thread sending its records (``repeat`` of them twice, shuffled in);
    ``{digest: status}`` of the answers, latencies, wall time, unreachable sends."""
    answers, lat, failed, lock = [], [], [], threading.Lock()

    def laptop(i, records):
        rng = random.Random(i)
        todo = records + rng.sample(records, round(repeat * len(records)))
        rng.shuffle(todo)
        src = f"127.0.0.{2 + i}" if MANY_ADDRESSES else None
        for r in todo:
            t = time.perf_counter()
            try:
                status, answer = send(url, CODE, r, timeout=10, source=src)
            except OSError:
                with lock:
                    failed.append(digest(r))
                continue
            with lock:
                lat.append(time.perf_counter() - t)
                answers.append((digest(r), status, answer))

    t0 = time.perf_counter()
    with ThreadPoolExecutor(len(laptops)) as pool:
        list(pool.map(laptop, range(len(laptops)), laptops))
    return {"answers": answers, "lat": lat, "wall": time.perf_counter() - t0, "failed": failed}


@pytest.mark.skipif(not MANY_ADDRESSES, reason="30 laptops need 30 loopback addresses "
                    "(Linux routes 127.0.0.0/8; macOS has only 127.0.0.1)")
def test_thirty_laptops_every_record_stored_exactly_once(shared, base):
    figures, server = {}, shared
    for label, repeat in (("once", 0.0), ("10% repeated", 0.1)):
        laptops = laptop_records(base, seed=int(repeat * 10) + 1)   # 30 new laptops each
        sent = {digest(r) for recs in laptops for r in recs}
        got = load(server.url, laptops, repeat)
        assert not got["failed"], f"{len(got['failed'])} sends could not reach the room"
        statuses = [s for _, s, _ in got["answers"]]
        assert all(a["digest"] == d for d, s, a in got["answers"] if s in (200, 201))
        stored = [e["digest"] for e in server.index() if e["digest"] in sent]
        assert len(stored) == len(set(stored)) == len(sent) and set(stored) == sent
        assert statuses.count(201) == len(sent), "each record stored by exactly one request"
        assert statuses.count(200) == len(statuses) - len(sent), "each repeat: already stored"
        lat = sorted(got["lat"])
        figures[label] = {
            "laptops": LAPTOPS, "chapters": len(CHAPTERS), "requests": len(statuses),
            "stored": len(stored), "wall_s": round(got["wall"], 2),
            "requests_per_s": round(len(statuses) / got["wall"], 1),
            "p50_ms": round(1000 * statistics.median(lat), 1),
            "p99_ms": round(1000 * lat[int(0.99 * (len(lat) - 1))], 1)}
        print(f"\nroom load, {label}: {figures[label]}")
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "room-load.json").write_text(json.dumps(figures, indent=2))


@pytest.mark.skipif(not MANY_ADDRESSES, reason="30 loopback addresses: Linux only")
def test_sigkill_in_the_middle_loses_nothing_acknowledged(room, tmp_path, base):
    folder = tmp_path / "killed"
    server = room(folder=folder)
    laptops = laptop_records(base, seed=7)
    sent = {digest(r) for recs in laptops for r in recs}
    result = {}
    loader = threading.Thread(target=lambda: result.update(load(server.url, laptops)))
    loader.start()
    deadline = time.monotonic() + 60
    while len(server.index()) < len(sent) // 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    server.proc.send_signal(signal.SIGKILL)
    server.proc.wait(10)
    loader.join(120)
    acked = {d for d, s, _ in result["answers"] if s in (200, 201)}
    assert result["failed"] and acked, "the kill should land in the middle of the load"
    again = room(folder=folder)
    kept = {e["digest"] for e in again.index()}
    assert acked <= kept, f"{len(acked - kept)} acknowledged records lost by the kill"
    redo = load(again.url, laptops)              # every laptop sends everything again
    final = [e["digest"] for e in again.index()]
    assert len(final) == len(set(final)) == len(sent) and set(final) == sent
    assert all(s == 200 for d, s, _ in redo["answers"] if d in kept)
    print(f"\nSIGKILL after {len(acked)} of {len(sent)} acknowledged: all {len(acked)} kept; "
          f"{len(kept) - len(acked)} stored but unanswered; resend stored the rest once")


def test_every_bad_input_gets_its_4xx_and_stores_nothing(shared, base):
    server, good = shared, copy.deepcopy(base)
    good["environment"]["hostname"] = "laptop-0bad000001"
    port, before = server.port, len(server.index())
    hdr = {CODE_HEADER: CODE, "Content-Type": "application/json"}

    def post(record=None, raw=None, headers=hdr):
        body = raw if raw is not None else json.dumps(record).encode()
        return request(port, "POST", "/records", body, headers)

    def edited(fn):
        r = copy.deepcopy(good)
        fn(r)
        return r

    def obs(**kw):
        return edited(lambda r: r["observations"][0].update(kw))

    cases = {
        "not JSON": (post(raw=b"{this is not json"), 400),
        "not UTF-8": (post(raw=b"\xff\xfe{}"), 400),
        "a NaN": (post(raw=json.dumps(good).replace("9.5", "NaN").encode()), 400),
        "wrong schema": (post(edited(lambda r: r.update(schema="other/1"))), 422),
        "newer schema version": (post(edited(lambda r: r.update(schema="labkit.checkpoint/9")
                                             )), 422),
        "a required key missing": (post(edited(lambda r: r.pop("observations"))), 422),
        "wrong room code": (post(good, headers={**hdr, CODE_HEADER: "WRONG1"}), 403),
        "no room code": (post(good, headers={"Content-Type": "application/json"}), 403),
        "an absurd value": (post(obs(value=1e300)), 422),
        "a negative rate": (post(obs(value=-3.0)), 422),
        "a value that is a list": (post(obs(value=[1, 2])), 422),
        "script in a note": (post(obs(note="<script>alert(1)</script>")), 422),
        "HTML in a name": (post(obs(name="x<img src=x onerror=alert(1)>")), 422),
        "HTML in a config": (post(obs(config={"k": "< b>bold"})), 422),
        "a path-like chapter": (post(edited(lambda r: r.update(chapter="../../etc"))), 422),
        "a path-like data name": (post(edited(lambda r: r["data"].append(
            {"name": "/etc/passwd"}))), 422),
        "a path in a constraint": (post(edited(lambda r: r["constraints"].append(
            "read from /home/ann/data/shards"))), 422),
        "a real hostname": (post(edited(lambda r: r["environment"].update(
            hostname="anns-macbook.local"))), 422),
        "created not a time": (post(edited(lambda r: r.update(created="yesterday"))), 422),
    }
    assert len(server.index()) == before, "nothing stored"
    cases["over 1 MiB"] = (_headers_only(port, 2_000_000), 413)
    cases["no Content-Length"] = (_chunked(port), 411)
    cases["a slow body"] = (_trickle(port, json.dumps(good).encode(), every_s=0.2), 408)
    wrong = {k: (got[0], want, got[1][:150]) for k, (got, want) in cases.items()
             if got[0] != want}
    assert not wrong, f"cases answered otherwise: {wrong}"
    for name, (got, _) in cases.items():
        assert json.loads(got[1]).get("error"), f"{name}: the 4xx names no error"
    assert len(server.index()) == before, "a refused record was stored"
    # the same record twice: stored once
    first, second = post(good), post(good)
    assert (first[0], second[0]) == (201, 200) and len(server.index()) == before + 1
    # over RATE requests a second from one address: 429 with Retry-After, nothing stored
    src = "127.0.0.99" if MANY_ADDRESSES else None
    burst = [request(port, "POST", "/records", b"{}", {**hdr, CODE_HEADER: "WRONG1"}, src)
             for _ in range(60)]
    limited = [h for s, _, h in burst if s == 429]
    assert limited and all(float(h["retry-after"]) > 0 for h in limited)
    assert len(server.index()) == before + 1
    status, page, _ = request(port, "GET", "/?me=%3Cscript%3Ealert(1)%3C/script%3E")
    assert status == 200 and "<script" not in page, "the page escapes what it shows"


def _raw(port: int, head: bytes, trickle: bytes = b"", every_s: float = 0.0) -> tuple:
    """Send ``head`` then ``trickle`` a byte at a time; the status line as soon as it comes."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(head)
        s.setblocking(False)
        answer = b""
        for byte in [trickle[i:i + 1] for i in range(len(trickle))] or [b""]:
            try:
                answer += s.recv(65536)
            except BlockingIOError:
                pass
            if answer:
                break
            try:
                s.sendall(byte)
            except OSError:
                break
            time.sleep(every_s)
        s.settimeout(10)
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            more = s.recv(65536)
            if not more:
                break
            answer += more
    head_text, _, body = answer.partition(b"\r\n\r\n")
    return int(head_text.split()[1]), body.decode(), {}


def _headers_only(port: int, size: int) -> tuple:
    return _raw(port, f"POST /records HTTP/1.1\r\nHost: x\r\n{CODE_HEADER}: {CODE}\r\n"
                      f"Content-Length: {size}\r\n\r\n".encode())


def _chunked(port: int) -> tuple:
    return _raw(port, f"POST /records HTTP/1.1\r\nHost: x\r\n{CODE_HEADER}: {CODE}\r\n"
                      "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n".encode())


def _trickle(port: int, body: bytes, every_s: float) -> tuple:
    return _raw(port, f"POST /records HTTP/1.1\r\nHost: x\r\n{CODE_HEADER}: {CODE}\r\n"
                      f"Content-Length: {len(body)}\r\n\r\n".encode(), body, every_s)


def test_the_page_in_chromium_and_the_report(room, base, tmp_path):
    import test_browser as tb

    tb._needs_chromium()
    server = room()
    for recs in laptop_records(base, n_laptops=6, seed=3):
        for r in recs[:3]:
            assert send(server.url, CODE, r)[0] == 201
    me = "laptop-003" + f"{2:07x}"
    status, report, headers = request(server.port, "GET", "/report")
    assert status == 200 and "text/html" in headers["content-type"]
    assert "<html" in report.lower() and "data:image/png;base64," in report, \
        "the report is one HTML file, its plots inside"
    tb.ARTIFACTS.mkdir(parents=True, exist_ok=True)
    short = Path(tempfile.mkdtemp(prefix="chromium-"))   # its socket path: 107 bytes at most
    driver = tb._browser(tmp_path / "profile", short)
    try:
        driver.get(f"{server.url}/?me={me}")
        from selenium.webdriver.common.by import By

        strips = driver.find_elements(By.CSS_SELECTOR, "svg.strip")
        assert len(strips) >= 3 * 2 and all(s.size["width"] > 300 for s in strips)
        you = driver.find_elements(By.CSS_SELECTOR, "circle.you")
        assert len(you) == len(strips), "'you' is marked on every figure"
        dots = driver.find_elements(By.CSS_SELECTOR, "circle.dot")
        assert len(dots) == 5 * len(strips), "a dot per other laptop"
        assert "you" in driver.find_element(By.TAG_NAME, "body").text
        severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert not severe, f"console errors: {severe}"
        driver.save_screenshot(str(tb.ARTIFACTS / "room.png"))
    finally:
        tb._quit(driver)
        shutil.rmtree(short, ignore_errors=True)


def test_submit_and_the_checkpoint_cells_opt_in_send(shared, tmp_path, monkeypatch, capsys):
    server, records = shared, tmp_path / "records"

    def mine():
        return [e for e in server.index() if e["laptop"] == laptop_id()]

    monkeypatch.delenv("LABKIT_ROOM", raising=False)
    for chapter in ("00_start_here", "02_mmap"):
        Checkpoint(chapter, scale="ci", records_dir=records).observe(
            "read.gb_per_s", 3.0, "GB/s").write(print_summary=False)
    assert mine() == [], "without LABKIT_ROOM nothing leaves the laptop"
    for code, rc, said in ((CODE, 0, "2 stored"), (CODE, 0, "2 already stored"),
                           ("WRONG1", 1, "refused (403)")):   # the CLI's own entry point
        assert main(["room", "submit", server.url, "--code", code, str(records)]) == rc
        assert said in capsys.readouterr().out
    assert len(mine()) == 2
    body = json.loads(request(server.port, "GET", "/records")[1])
    assert all(set(e) == {"digest", "laptop", "chapter"} for e in body)
    # the checkpoint cell: with the room set, write() also sends; a dead room is one line
    monkeypatch.setenv("LABKIT_ROOM", server.url)
    monkeypatch.setenv("LABKIT_ROOM_CODE", CODE)
    Checkpoint("01_measuring_a_loader", scale="ci", records_dir=records).observe(
        "loader.samples_per_s", 1200.0, "samples/s").write(print_summary=False)
    assert "room: stored" in capsys.readouterr().out and len(mine()) == 3
    monkeypatch.setenv("LABKIT_ROOM", "http://127.0.0.1:9")
    Checkpoint("01_measuring_a_loader", scale="ci", records_dir=records).write(False)
    assert "could not send" in capsys.readouterr().out


def test_what_leaves_the_laptop(tmp_path):
    ck = Checkpoint("02_mmap", scale="ci", records_dir=tmp_path)
    ck.observe("x", 1, "", note=f"read {Path.home()}/data/a.bin and /srv/x/y.bin; see "
               "https://pytorch.org/docs/stable/data.html, about ~3 s")
    ck.data_entries.append({"name": "images_small", "path": str(tmp_path / "fx")})
    out = shareable(ck.record())
    text = json.dumps(out)
    assert str(tmp_path) not in text and str(Path.home()) not in text
    assert out["environment"]["hostname"] == laptop_id() != socket.gethostname()
    assert "path" not in out["environment"]["data"] and "path" not in out["data"][0]
    assert {"filesystem", "free_bytes"} <= set(out["environment"]["data"])
    assert out["observations"][0]["note"] == ("read [path] and [path]; see "
                                              "https://pytorch.org/docs/stable/data.html, "
                                              "about ~3 s")
