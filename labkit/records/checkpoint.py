"""The local verification checkpoint: a JSON record of what a chapter observed (every chapter).

Observations with units and knobs, the data, the conditions (warm page cache) and the machine;
``labkit report`` compares records.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import re
import secrets
from datetime import UTC, datetime
from pathlib import Path

from .. import paths
from ..errors import RecordError
from ..scale import resolve_scale
from .machine import environment, gpu_line, human_bytes, versions
from .room import send_from_env

SCHEMA = "labkit.checkpoint/1"
_SCHEMA_PREFIX, _SCHEMA_VERSION = SCHEMA.rsplit("/", 1)
REQUIRED_KEYS = ("schema", "chapter", "created", "scale", "labkit_version", "environment",
                 "data", "observations", "constraints")
_KEY_TYPES = {"environment": (dict, "object"), "data": (list, "array"),
              "observations": (list, "array"), "constraints": (list, "array")}
_OBSERVATION_KEYS = ("name", "value", "unit")
_MAX_TEXT = 200  # a value string is a label ("ok", "pyarrow"), not a log
_SHOWN = 8  # observations listed in the printed summary


def _jsonable(obj):
    """Coerce config values (numpy scalars, paths, dtypes) to plain JSON."""

    def default(o):
        return o.item() if hasattr(o, "item") else str(o)

    return json.loads(json.dumps(obj, default=default))


def _check_value(name: str, value):
    if isinstance(value, bool):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        if not math.isfinite(value):
            raise ValueError(f"observation {name!r}: value {value!r} is not finite")
        return float(value)
    if isinstance(value, str) and len(value) <= _MAX_TEXT:
        return value
    raise ValueError(
        f"observation {name!r}: value must be a finite number, bool, int or a string of at "
        f"most {_MAX_TEXT} characters, not {type(value).__name__} {str(value)[:60]!r}"
    )


def format_value(value) -> str:
    """Numbers rounded for reading (4 significant digits, thousands grouped)."""
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def observation_name(text: str) -> str:
    """``"mmap rows + step"`` -> ``"mmap_rows_step"``: record names stay greppable."""
    return re.sub(r"[^a-z0-9.]+", "_", str(text).lower()).strip("_")


def format_config(config: dict | None) -> str:
    """``{"num_workers": 2, "batch_size": 64}`` -> ``'num_workers=2 batch_size=64'``."""
    return " ".join(f"{k}={v}" for k, v in (config or {}).items())


class Checkpoint:
    """Collects what a chapter observed and writes it as one record (chapter 00): ``observe``
    one value, ``add`` a result's figures, ``constraint`` a condition, then ``write()``."""

    def __init__(self, chapter: str, scale: str | None = None, records_dir=None):
        if not isinstance(chapter, str) or not chapter.strip():
            raise ValueError(f"chapter must be a non-empty string, not {chapter!r}")
        self.chapter = chapter.strip()
        self.scale = resolve_scale(scale)
        self.records_dir = Path(records_dir).expanduser() if records_dir is not None else None
        self.data_entries: list[dict] = []
        self.observations: list[dict] = []
        self.constraints: list[str] = []

    def observe(self, name: str, value, unit: str, config=None, note=None) -> Checkpoint:
        """Record one observed value with its unit and the knobs that produced it."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"observation name must be a non-empty string, not {name!r}")
        self.observations.append({
            "name": name, "value": _check_value(name, value), "unit": str(unit),
            "config": _jsonable(dict(config or {})), "note": None if note is None else str(note),
        })
        return self

    def add(self, thing, name: str | None = None, config: dict | None = None,
            **kw) -> Checkpoint:
        """Record what a result (Measurement, Audit, ResumeTrial: anything with
        ``as_observations``), a list or a ``{name: result}`` dict observed; ``name`` prefixes
        the names, ``config`` joins every config."""
        if isinstance(thing, dict):
            for key, item in thing.items():
                self.add(item, key if name is None else f"{name}.{key}", config, **kw)
            return self
        if isinstance(thing, (list, tuple)):
            for item in thing:
                self.add(item, name, config, **kw)
            return self
        method = getattr(thing, "as_observations", None)
        if not callable(method):
            raise TypeError(
                f"Checkpoint.add takes a result with an as_observations() method (a "
                f"Measurement, an Audit, a ResumeTrial) or a list or dict of them, not "
                f"{type(thing).__name__}; record a single value with observe(name, value, unit)"
            )
        # Each observation is validated like observe() so a record never holds a NaN.
        for obs in method(name=name, config=config, **kw):
            self.observe(obs["name"], obs["value"], obs["unit"], obs.get("config"),
                         obs.get("note"))
        return self

    @staticmethod
    def read(path) -> dict:
        """Read and validate one written record (chapter 00); errors name the file and fault."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise RecordError(f"cannot read checkpoint {path}: {exc}") from exc
        try:
            record = json.loads(text)
        except json.JSONDecodeError as exc:
            raise RecordError(f"checkpoint {path} is not valid JSON: {exc}") from exc
        return validate(record, path)

    def constraint(self, text: str) -> Checkpoint:
        """Note a condition the numbers depend on, e.g. ``"warm page cache"``."""
        self.constraints.append(str(text))
        return self

    def use_fixture(self, fx) -> Checkpoint:
        """Record which generated fixture (and which exact bytes, by digest) was measured."""
        self.data_entries.append({
            "name": fx.name, "path": str(fx.path), "digest": fx.digest,
            "nbytes": fx.nbytes, "files": fx.files, "scale": fx.scale,
        })
        return self

    def record(self) -> dict:
        """The record as it would be written now."""
        data_path = self.data_entries[0]["path"] if self.data_entries else None
        return {
            "schema": SCHEMA, "chapter": self.chapter,
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "scale": self.scale, "labkit_version": versions(["labkit"])["labkit"],
            "environment": environment(data_path=data_path),
            "data": list(self.data_entries), "observations": list(self.observations),
            "constraints": list(self.constraints),
        }

    def write(self, print_summary: bool = True) -> Path:
        """Write the record atomically into the records folder (RecordError if it cannot) and
        return its path; with LABKIT_ROOM set, also send it to that workshop room."""
        folder = self.records_dir or paths.records_dir()
        record = self.record()
        stamp = datetime.fromisoformat(record["created"]).strftime("%Y%m%dT%H%M%SZ")
        stem = f"{_slug(self.chapter)}--{_slug(record['environment']['hostname'])}--{stamp}"
        text = json.dumps(record, indent=1, allow_nan=False)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            target = folder / f"{stem}.json"
            for n in range(2, 1000):  # two writes in one second must not overwrite
                if not target.exists():
                    break
                target = folder / f"{stem}-{n}.json"
            # Temp file + rename: an interrupted kernel never leaves half a record behind.
            # os.open with 0o666 (not mkstemp's 0o600) so records stay readable per umask.
            tmp = folder / f".{stem}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(text + "\n")
                os.replace(tmp, target)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
        except OSError as exc:
            raise RecordError(
                f"cannot write checkpoint records to {folder}: {exc.strerror or exc}; "
                f"set LABKIT_RECORDS to a writable folder"
            ) from exc
        if print_summary:
            print(summary(record, target))
        if os.environ.get("LABKIT_ROOM"):   # opt in: without it nothing leaves the laptop
            send_from_env(record)
        return target


def validate(record, where) -> dict:
    """``record`` if it is a checkpoint this labkit reads, else a RecordError naming
    ``where`` (a file, a sender) and the fault (chapter 00; the room checks each record sent)."""
    schema = record.get("schema") if isinstance(record, dict) else None
    if not isinstance(schema, str):
        raise RecordError(f"{where} is not a labkit checkpoint (no 'schema' string)")
    if schema != SCHEMA:
        prefix, _, version = schema.rpartition("/")
        if (prefix == _SCHEMA_PREFIX and version.isdigit()
                and int(version) > int(_SCHEMA_VERSION)):
            raise RecordError(f"{where} was written by a newer labkit (schema {schema}; this "
                              f"labkit reads {SCHEMA}); upgrade labkit to read it")
        raise RecordError(f"{where} has unknown schema {schema!r} (expected {SCHEMA})")
    missing = [k for k in REQUIRED_KEYS if k not in record]
    if missing:
        raise RecordError(f"{where} lacks required keys: {', '.join(missing)}")
    for key, (kind, json_name) in _KEY_TYPES.items():
        if not isinstance(record[key], kind):
            raise RecordError(f"{where}: {key!r} must be a JSON {json_name}")
    for i, obs in enumerate(record["observations"]):
        if not isinstance(obs, dict) or any(k not in obs for k in _OBSERVATION_KEYS):
            raise RecordError(f"{where}: observation {i} needs the keys name, value, unit")
    return record


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", str(text)).strip("_") or "unknown"


def summary(record: dict, path=None) -> str:
    """The short human summary :meth:`Checkpoint.write` prints."""
    env = record.get("environment", {})
    cpu = env.get("cpu", {})
    obs = record.get("observations", [])
    lines = [
        f"checkpoint {record['chapter']} (scale {record['scale']}) {record.get('created', '')}",
        f"machine    {env.get('hostname')}: {cpu.get('model')}, "
        f"{cpu.get('logical_cores')} cores, "
        f"{human_bytes(env.get('memory', {}).get('total_bytes'))} RAM, "
        f"{gpu_line(env.get('gpu', {}))}",
    ]
    if record.get("constraints"):
        lines.append(f"conditions {', '.join(record['constraints'])}")
    lines.append(f"{len(obs)} observation{'s' if len(obs) != 1 else ''}:")
    for o in obs[:_SHOWN]:
        cfg = format_config(o.get("config"))
        lines.append(f"  {o['name']} = {format_value(o['value'])} {o['unit']}".rstrip()
                     + (f" [{cfg}]" if cfg else ""))
    if len(obs) > _SHOWN:
        lines.append(f"  ... and {len(obs) - _SHOWN} more")
    if path is not None:
        lines.append(f"written to {path}")
        lines.append(f"compare with: labkit report {Path(path).parent}")
    return "\n".join(lines)


def load_records(dirs) -> list[dict]:
    """Every ``*.json`` record under the folders (recursive), oldest first, each with
    ``_source`` (its file) and ``_folder`` (where it was found); RecordError for a missing or
    empty folder or an invalid record."""
    dirs = [dirs] if isinstance(dirs, (str, Path)) else list(dirs)
    if not dirs:
        raise RecordError("no records folder given")
    records, seen = [], set()
    for d in map(Path, dirs):
        if not d.exists():
            raise RecordError(f"records folder {d} does not exist")
        files = [d] if d.is_file() else sorted(d.rglob("*.json"))
        if not files:
            raise RecordError(f"{d} holds no checkpoint records (*.json); run a chapter's "
                              "checkpoint cell first, or point at the folder LABKIT_RECORDS names")
        for f in files:
            if f.resolve() not in seen:
                seen.add(f.resolve())
                records.append({**Checkpoint.read(f), "_source": str(f), "_folder": str(d)})
    return sorted(records, key=lambda r: str(r["created"]))


def reference_figures(machine: str = "nvidia-h200", chapter: str = "bench_gpu") -> dict:
    """``{name: value}`` of the newest ``chapter`` record in ``reference/<machine>/``
    (chapters 00, 09, 10, 16): a real GPU server's figures, from ``make test-gpu``."""
    folder = paths.REPO_ROOT / "reference" / machine
    found = [r for r in load_records(folder) if r["chapter"] == chapter]
    if not found:
        raise RecordError(f"{folder} holds no {chapter!r} record")
    return {o["name"]: o["value"] for o in found[-1]["observations"]}
