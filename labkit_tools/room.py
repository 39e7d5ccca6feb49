"""``labkit room``: the workshop room on the instructor's machine (issue 47; every chapter).

Each laptop's checkpoint records, sent by ``labkit room submit`` or by a chapter's checkpoint
cell once LABKIT_ROOM is set (``labkit/records/room.py`` takes the paths and names out), are
kept in one SQLite file and shown live: per chapter, each headline figure across the room (a
dot per laptop, the median, ``?me=`` marked "you"), beside the lowest and highest laptops
their machine facts; ``/report`` is ``labkit report``'s offline HTML file, fed from the room.

Why Starlette under uvicorn, not Flask under a WSGI server: a laptop that sends its body
slowly must get a 408 while the room goes on. ASGI hands the app the body as it arrives, so
the app times it (``asyncio.timeout``); waitress buffers the whole body before the app sees
it and can only drop an idle channel without an answer, and cheroot's or gunicorn's sync
workers hand over a blocking read that a trickle of bytes never times out.
Why SQLite: in the standard library, one file, WAL with synchronous=FULL, so a record is on
disk before its 201 leaves and a SIGKILL loses nothing the room acknowledged.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import html
import json
import math
import re
import secrets
import socket
import sqlite3
import statistics
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.responses import HTMLResponse, JSONResponse
from starlette.routing import Route

from labkit import paths
from labkit.errors import LabkitError, RecordError
from labkit.records.checkpoint import format_value, load_records, validate
from labkit.records.machine import human_bytes
from labkit.records.room import CODE_HEADER, LAPTOP_RE, PATH_RE, laptop_id, send, shareable

from .report import write_report

MAX_BODY = 1 << 20            # bytes a record may take (a chapter's is 3-30 KiB)
RATE, BURST = 10.0, 40        # requests a second from one address, and the burst allowed
ABSURD = 1e15                 # no figure a laptop measures is larger
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,119}")       # chapters, fixtures
OBS_RE = re.compile(r"[A-Za-z0-9][^\x00-\x1f\\]{0,199}")         # observation names
TAG_RE = re.compile(r"<\s*/?\s*[A-Za-z!?]")                      # HTML or script
CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"                # nothing read two ways
SHOWN = 8                     # headline figures per chapter on the page


class Room:
    """One SQLite row per distinct record (its digest); the page reads them parsed once."""

    def __init__(self, folder: Path):
        folder.mkdir(parents=True, exist_ok=True)
        self.folder, self.lock = folder, threading.Lock()
        self.db = sqlite3.connect(folder / "room.sqlite", check_same_thread=False,
                                  isolation_level=None)     # autocommit: each insert durable
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute("CREATE TABLE IF NOT EXISTS records (digest TEXT PRIMARY KEY, laptop "
                        "TEXT, chapter TEXT, created TEXT, received REAL, body TEXT)")
        self.parsed = [json.loads(b) for (b,) in self.db.execute("SELECT body FROM records")]

    def add(self, record: dict) -> tuple[bool, str]:
        body = json.dumps(record, sort_keys=True, separators=(",", ":"))
        digest = hashlib.sha256(body.encode()).hexdigest()
        with self.lock:
            cur = self.db.execute("INSERT OR IGNORE INTO records VALUES (?,?,?,?,?,?)",
                                  (digest, record["environment"]["hostname"],
                                   record["chapter"], record["created"], time.time(), body))
            if cur.rowcount == 1:
                self.parsed.append(record)
        return cur.rowcount == 1, digest

    def records(self) -> list[dict]:
        with self.lock:
            return sorted(self.parsed, key=lambda r: r["created"])

    def index(self) -> list[dict]:
        with self.lock:
            rows = self.db.execute("SELECT digest, laptop, chapter FROM records").fetchall()
        return [dict(zip(("digest", "laptop", "chapter"), r, strict=True)) for r in rows]


def _strings(v):
    if isinstance(v, dict):
        for k, x in v.items():
            yield str(k)
            yield from _strings(x)
    elif isinstance(v, list):
        for x in v:
            yield from _strings(x)
    elif isinstance(v, str):
        yield v


def check(record) -> str | None:
    """What is wrong with a sent record, or None: the checkpoint schema, the pseudonym, plain
    names, plausible figures, no HTML and no path anywhere."""
    try:
        validate(record, "the record")
    except RecordError as e:
        return str(e)
    env = record["environment"]
    if not isinstance(env, dict) or not LAPTOP_RE.fullmatch(str(env.get("hostname"))):
        return ("environment.hostname is not a laptop pseudonym: send with `labkit room "
                "submit`, which takes names and paths out")
    names = [("chapter", record["chapter"])] + [
        (f"data {i} name", d.get("name") if isinstance(d, dict) else d)
        for i, d in enumerate(record["data"])]
    for what, name in names:
        if not isinstance(name, str) or not NAME_RE.fullmatch(name) or ".." in name:
            return f"{what} {str(name)[:60]!r} is not a plain name (letters, digits, _.+-)"
    for o in record["observations"]:
        name, value = o["name"], o["value"]
        if not isinstance(name, str) or not OBS_RE.fullmatch(name) or ".." in name:
            return f"observation name {str(name)[:60]!r} is not a plain name"
        if isinstance(value, (bool, str)):
            continue
        if (not isinstance(value, (int, float)) or not math.isfinite(value)
                or abs(value) > ABSURD):
            return f"observation {name!r}: {str(value)[:40]} is not a plausible figure"
        if value < 0 and str(o["unit"]).endswith("/s"):
            return f"observation {name!r}: a negative rate ({value} {o['unit']})"
    for text in _strings(record):
        if TAG_RE.search(text):
            return f"a field holds HTML or script: {text[:60]!r}"
        if PATH_RE.search(text):
            return f"a field holds a path: {text[:60]!r}"
    try:
        datetime.fromisoformat(record["created"])
    except (TypeError, ValueError):
        return f"created {str(record['created'])[:40]!r} is not an ISO time"
    return None


def _answer(status: int, error: str | None = None, **kw) -> JSONResponse:
    close = {"Connection": "close"} if status in (408, 411, 413) else {}
    return JSONResponse({"error": error} if error else kw, status, headers=close)


def _no_constant(text):
    raise ValueError(f"{text} is not a number a record may hold")


def make_app(room: Room, code: str, body_s: float = 5.0) -> Starlette:
    """The room's ASGI app: POST /records, the page /, /report, /records (the index)."""
    buckets: dict[str, tuple[float, float]] = {}

    async def post(request):
        size = request.headers.get("content-length")
        if size is None or not size.isdigit():
            return _answer(411, "a Content-Length is required")
        if int(size) > MAX_BODY:
            return _answer(413, f"a record may take {MAX_BODY} bytes; this one {size}")
        body = b""
        try:
            async with asyncio.timeout(body_s):
                async for chunk in request.stream():
                    body += chunk
        except TimeoutError:
            return _answer(408, f"the body took over {body_s:g} s to arrive")
        now, who = time.monotonic(), request.client.host if request.client else "?"
        tokens, last = buckets.get(who, (BURST, now))
        tokens = min(BURST, tokens + (now - last) * RATE)
        if tokens < 1:
            buckets[who] = (tokens, now)
            return JSONResponse({"error": f"over {RATE:g} requests a second"}, 429,
                                headers={"Retry-After": "1"})   # whole seconds (RFC 9110)
        buckets[who] = (tokens - 1, now)
        if not hmac.compare_digest(request.headers.get(CODE_HEADER, "").encode(), code.encode()):
            return _answer(403, f"wrong room code (the {CODE_HEADER} header)")
        try:
            record = json.loads(body, parse_constant=_no_constant)
        except (ValueError, RecursionError) as e:
            return _answer(400, f"not JSON: {str(e)[:120]}")
        fault = check(record)
        if fault:
            return _answer(422, fault)
        new, digest = room.add(record)
        return _answer(201 if new else 200, result="stored" if new else "already stored",
                       digest=digest)

    async def page(request):
        me = request.query_params.get("me", "")
        return HTMLResponse(render_page(room.records(), code,
                                        me if LAPTOP_RE.fullmatch(me) else None))

    async def report(request):
        records = room.records()
        if not records:
            return HTMLResponse("<p>The room holds no records yet.</p>", 404)
        return HTMLResponse(room_report(records, code))

    async def index(request):
        return JSONResponse(room.index())

    return Starlette(routes=[Route("/records", post, methods=["POST"]),
                             Route("/records", index, methods=["GET"]),
                             Route("/", page), Route("/report", report)])


def room_report(records: list[dict], code: str) -> str:
    """``labkit report``'s HTML file, fed from the room's records, as text."""
    fed = [{**r, "_source": f"{r['environment']['hostname']}/{r['chapter']}.json",
            "_folder": f"room {code}"} for r in records]
    if not fed:
        raise LabkitError("the room holds no records yet")
    with tempfile.TemporaryDirectory(prefix="labkit-room-") as tmp:
        return write_report([f"room {code}"], out=Path(tmp) / "report.html", fmt="html",
                            records=fed).read_text()


def facts(env: dict) -> str:
    """One line of what bounds a laptop: cores, memory, disk, OS, versions, start method."""
    cpu, mem, data = env.get("cpu") or {}, env.get("memory") or {}, env.get("data") or {}
    osd, ver = env.get("os") or {}, env.get("versions") or {}
    return (f"{cpu.get('logical_cores', '?')} cores, {human_bytes(mem.get('total_bytes'))} "
            f"RAM, disk {data.get('filesystem') or '?'} {human_bytes(data.get('free_bytes'))} "
            f"free, {osd.get('system', '?')} {osd.get('release', '')}, python "
            f"{(env.get('python') or {}).get('version', '?')}, torch {ver.get('torch', '?')}, "
            f"{env.get('start_method', '?')}")


def strip(values: dict[str, float], me: str | None) -> str:
    """An inline SVG: a dot per laptop, the median's line, ``me`` ringed and labelled."""
    w, h, pad = 420, 34, 12
    lo, hi = min(values.values()), max(values.values())
    log = lo > 0 and hi / lo > 20
    f = math.log10 if log else float
    span = (f(hi) - f(lo)) or 1

    def x(v):
        return pad + (f(v) - f(lo)) / span * (w - 2 * pad)

    med = statistics.median(values.values())
    parts = [f'<svg class="strip" width="{w}" height="{h}" role="img">',
             f'<line x1="{pad}" x2="{w - pad}" y1="20" y2="20" class="axis"/>',
             f'<line x1="{x(med):.1f}" x2="{x(med):.1f}" y1="8" y2="30" class="median">'
             f'<title>median {med:.4g}</title></line>']
    for laptop, v in values.items():
        you = laptop == me
        parts.append(f'<circle cx="{x(v):.1f}" cy="20" r="{7 if you else 4}" '
                     f'class="{"you" if you else "dot"}"><title>{html.escape(laptop)}: '
                     f'{v:.4g}</title></circle>')
        if you:
            parts.append(f'<text x="{x(v):.1f}" y="9" class="you-label">you</text>')
    return "".join(parts) + f'<text x="{w - pad}" y="33" class="scale">' + (
        "log" if log else "linear") + "</text></svg>"


CSS = """body{font:14px system-ui,sans-serif;margin:1.5em;max-width:72em}
table{border-collapse:collapse}td,th{padding:2px 8px;border-bottom:1px solid #ddd;
text-align:left;vertical-align:middle}.axis{stroke:#aaa}.median{stroke:#d62728;
stroke-width:2}.dot{fill:#1f77b4;opacity:.75}.you{fill:none;stroke:#ff7f0e;stroke-width:3}
.you-label{font-size:10px;fill:#ff7f0e;text-anchor:middle}.scale{font-size:9px;fill:#888;
text-anchor:end}.facts{font-size:12px;color:#555}"""


def render_page(records: list[dict], code: str, me: str | None) -> str:
    """The live page: per chapter its figures across the room, then the machines."""
    esc = html.escape
    newest: dict[tuple[str, str], dict] = {}
    for r in records:                                   # oldest first: the newest wins
        newest[(r["chapter"], r["environment"]["hostname"])] = r
    envs = {lap: r["environment"] for (_, lap), r in newest.items()}
    out = [f'<!doctype html><html><head><meta charset="utf-8"><meta http-equiv="refresh" '
           f'content="15"><link rel="icon" href="data:,"><title>labkit room {esc(code)}'
           f"</title><style>{CSS}</style></head>"
           f"<body><h1>labkit room {esc(code)}</h1><p>{len(envs)} laptops, {len(records)} "
           f"records; this page refreshes every 15 s. "
           + (f"You are {esc(me)} (ringed). " if me else "Add ?me=YOUR-ID to be ringed. ")
           + '<a href="report">the room as one report file</a></p>']
    for chapter in sorted({c for c, _ in newest}):
        figures: dict[tuple[str, str], dict[str, float]] = {}
        for (c, lap), r in newest.items():
            if c != chapter:
                continue
            for o in r["observations"]:
                v = o["value"]
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    key = (o["name"], o["unit"])
                    if key in figures or len(figures) < SHOWN:
                        figures.setdefault(key, {}).setdefault(lap, v)
        out.append(f"<h2>{esc(chapter)}</h2><table>")
        for (name, unit), values in figures.items():
            lo, hi = min(values, key=values.get), max(values, key=values.get)
            med = statistics.median(values.values())
            you = f", you {format_value(values[me])}" if me in values else ""
            out.append(f"<tr><td>{esc(name)}<br><small>{esc(unit)}, median "
                       f"{format_value(med)}{you}, {len(values)} laptops</small></td><td>"
                       f'{strip(values, me)}</td><td class="facts">lowest '
                       f"{format_value(values[lo])}: {esc(facts(envs[lo]))}<br>highest "
                       f"{format_value(values[hi])}: {esc(facts(envs[hi]))}</td></tr>")
        out.append("</table>")
    out.append("<h2>Machines</h2><table><tr><th>laptop</th><th>facts</th></tr>")
    out += [f"<tr><td>{esc(lap)}{' (you)' if lap == me else ''}</td><td>{esc(facts(e))}</td>"
            "</tr>" for lap, e in sorted(envs.items())]
    return "\n".join(out) + "</table></body></html>"


def new_code(folder: Path, code: str | None) -> str:
    """The room's code: given, else the one ``room.json`` keeps, else a new one."""
    keep = folder / "room.json"
    if code is None and keep.exists():
        code = json.loads(keep.read_text())["code"]
    code = code or "".join(secrets.choice(CODE_ALPHABET) for _ in range(6))
    folder.mkdir(parents=True, exist_ok=True)
    keep.write_text(json.dumps({"code": code}))
    return code


def _address() -> str:
    """This machine's address on the network its default route leads to (a UDP connect
    sends nothing), else its hostname."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))               # TEST-NET-1: never routed anywhere
            return s.getsockname()[0]
    except OSError:
        return socket.gethostname()


def serve(folder=None, host: str = "127.0.0.1", port: int = 8765, code: str | None = None,
          body_s: float = 5.0) -> None:
    """Run the room until Ctrl-C: print its code, its address and who can reach it."""
    folder = Path(folder) if folder else paths.runs_dir() / "room"
    code = new_code(folder, code)
    room = Room(folder)
    sock = socket.create_server((host, port), reuse_port=False)
    url = f"http://{_address() if host in ('0.0.0.0', '::') else host}:{sock.getsockname()[1]}"
    who = ("only this machine can reach it (--host 0.0.0.0 or this machine's address "
           "opens it to the room)" if host.startswith("127.") or host == "localhost" else
           f"anyone who can reach {host} on this machine's networks can send with the code")
    print(f"room {code}: {url}/\nattendees: export LABKIT_ROOM={url} LABKIT_ROOM_CODE={code}"
          f"  (or: labkit room submit {url} --code {code})\nrecords kept in "
          f"{folder / 'room.sqlite'} ({len(room.index())} so far); {who}", flush=True)
    config = uvicorn.Config(make_app(room, code, body_s), log_level="warning",
                            access_log=False, timeout_keep_alive=5, limit_concurrency=200)
    uvicorn.Server(config).run(sockets=[sock])


def submit(url: str, code: str, dirs) -> int:
    """Send each record under ``dirs`` as :func:`shareable` makes it; 1 if any was refused."""
    counts = {"stored": 0, "already stored": 0, "refused": 0}
    for r in load_records(dirs or [paths.records_dir()]):
        try:
            status, answer = send(url, code, shareable(r))
        except OSError as e:
            raise LabkitError(f"cannot reach the room at {url}: {e}") from e
        said = answer.get("result") or f"refused ({status}): {answer.get('error')}"
        counts[said if status < 300 else "refused"] += 1
        print(f"{r['chapter']:<28}{said}  ({Path(r['_source']).name})")
    print(", ".join(f"{n} {k}" for k, n in counts.items())
          + f"; your dots: {url.rstrip('/')}/?me={laptop_id()}")
    return 1 if counts["refused"] else 0
