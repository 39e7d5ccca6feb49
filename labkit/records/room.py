"""A laptop's side of the workshop room (every chapter's checkpoint cell; ``labkit room``).

What leaves the laptop, and how: :func:`shareable` takes the paths and the user name out of
a record and names the machine by a pseudonym; :func:`send` posts it to the instructor's
``labkit room serve``, waiting out a 429 as the server asks. Nothing is sent unless the
learner sets LABKIT_ROOM (the room's address) and LABKIT_ROOM_CODE (its code).
"""

from __future__ import annotations

import copy
import getpass
import hashlib
import http.client
import json
import os
import re
import socket
import time
import urllib.parse

#: An absolute or home path inside any text: the server refuses a record that holds one.
PATH_RE = re.compile(r"(?<![\w.:/-])(?:~(?=/)|[A-Za-z]:\\|/(?=[\w.~-]+/))[^\s'\",;]*")
#: The pseudonym a laptop goes by in the room (a hash of its host and user name).
LAPTOP_RE = re.compile(r"laptop-[0-9a-f]{10}")
CODE_HEADER = "X-Labkit-Room"


def laptop_id() -> str:
    """``laptop-<10 hex>``: the same on every send from this machine and user; ``?me=`` on
    the room's page marks its dots."""
    who = f"{socket.gethostname()}|{getpass.getuser()}".encode()
    return "laptop-" + hashlib.sha256(who).hexdigest()[:10]


def shareable(record: dict) -> dict:
    """The record as the room receives it: hostname -> :func:`laptop_id`; no fixture or data
    path (the data's filesystem and free space stay), the home folder and the user name
    replaced in every text, any other absolute path -> ``[path]``."""
    out = {k: v for k, v in copy.deepcopy(record).items() if not k.startswith("_")}
    env = out.get("environment") or {}
    env["hostname"] = laptop_id()
    for key in ("path", "existing", "mount_point"):
        (env.get("data") or {}).pop(key, None)
    for entry in out.get("data") or []:
        if isinstance(entry, dict):
            entry.pop("path", None)
    home, user = os.path.expanduser("~"), getpass.getuser()

    def clean(v):
        if isinstance(v, dict):
            return {clean(k): clean(x) for k, x in v.items()}
        if isinstance(v, list):
            return [clean(x) for x in v]
        if not isinstance(v, str):
            return v
        if len(home) > 1:
            v = v.replace(home, "~")
        if len(user) >= 3:
            v = re.sub(rf"\b{re.escape(user)}\b", "[user]", v)
        return PATH_RE.sub("[path]", v)

    return clean(out)


def send(url: str, code: str, record: dict, timeout: float = 10, retries: int = 20,
         source: str | None = None) -> tuple[int, dict]:
    """POST one :func:`shareable` record to ``url``/records; ``(status, answer)``. A 429 is
    waited out (its Retry-After) up to ``retries`` times. ``source``: the local address to
    send from (the tests' simulated laptops on loopback). OSError if the room cannot be
    reached."""
    parts = urllib.parse.urlsplit(url if "//" in url else f"http://{url}")
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"room address {url!r}: expected http://HOST:PORT")
    body = json.dumps(record, allow_nan=False).encode()
    for _ in range(retries + 1):
        conn = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout,
                                          source_address=(source, 0) if source else None)
        try:
            conn.request("POST", parts.path.rstrip("/") + "/records", body,
                         {"Content-Type": "application/json", CODE_HEADER: code})
            resp = conn.getresponse()
            status, text = resp.status, resp.read().decode("utf-8", "replace")
            wait = float(resp.getheader("Retry-After") or 1)
        finally:
            conn.close()
        if status != 429:
            break
        time.sleep(wait)
    try:
        return status, json.loads(text)
    except json.JSONDecodeError:
        return status, {"error": text[:200]}


def send_from_env(record: dict) -> None:
    """The checkpoint cell's send: to LABKIT_ROOM with LABKIT_ROOM_CODE; one line either way,
    never an exception (the record is already on disk)."""
    url, code = os.environ.get("LABKIT_ROOM", ""), os.environ.get("LABKIT_ROOM_CODE", "")
    if not code:
        print(f"room: LABKIT_ROOM is set ({url}) but LABKIT_ROOM_CODE is not: nothing sent")
        return
    try:
        status, answer = send(url, code, shareable(record))
    except (OSError, ValueError) as exc:
        print(f"room: could not send to {url}: {exc} (the record stays on this laptop)")
        return
    if status < 300:
        print(f"room: {answer.get('result', 'stored')} at {url} (you are {laptop_id()}: "
              f"{url.rstrip('/')}/?me={laptop_id()})")
    else:
        print(f"room: {url} refused the record ({status}): {answer.get('error', answer)}")
