"""Deterministic synthetic fixtures: the data every chapter loads, made locally from seeds.

Specs live in ``data_fixtures/fixtures.toml``; each fixture is generated once per scale into
a git-ignored cache folder with a ``manifest.json`` of sizes and sha256 (chapter 00).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import sys
import time
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

from .. import paths
from ..errors import DataFormatError, FixtureError
from ..records.table import text_table
from ..scale import SCALES, resolve_scale
from .writers import CHAPTER_KINDS, WRITERS, writer_for

#: Bump when a writer changes its output, so every cached fixture is regenerated.
GENERATOR_VERSION = 1


@dataclass(frozen=True)
class Fixture:
    """A generated fixture on disk: its folder, resolved spec and manifest."""

    name: str
    kind: str
    scale: str
    path: Path
    spec: dict
    manifest: dict = field(repr=False)
    status: str = "cached"  # "generated", "cached" or "repaired" by the last ensure

    @property
    def digest(self) -> str:
        """sha256 over every file's path and sha256: one value to compare across machines."""
        return self.manifest["digest"]

    @property
    def nbytes(self) -> int:
        return sum(f["bytes"] for f in self.manifest["files"].values())

    @property
    def files(self) -> int:
        return len(self.manifest["files"])

    @property
    def samples(self) -> int:
        return self.manifest["samples"]

    @property
    def meta(self) -> dict:
        """Kind-specific facts: dtype and shape for arrays, classes for images, ..."""
        return self.manifest["meta"]

    def file(self, rel: str) -> Path:
        """The path of the fixture's file ``rel`` (its manifest's name)."""
        if rel not in self.manifest["files"]:
            raise FixtureError(f"fixture {self.name!r} has no file {rel!r} (see {self.path})")
        return self.path / rel

    def file_list(self, suffix: str = "") -> list[Path]:
        """Sorted absolute paths of the fixture's files ending in ``suffix``."""
        return [self.path / r for r in sorted(self.manifest["files"]) if r.endswith(suffix)]


def source_files(source, suffix: str = "", missing_ok: bool = False) -> list[Path]:
    """The files ending in ``suffix`` behind a :class:`Fixture`, a folder (sorted), one file
    or a list of these; none raises :class:`~labkit.DataFormatError` unless ``missing_ok``."""
    if hasattr(source, "file_list"):
        files = source.file_list(suffix)
    elif isinstance(source, (str, os.PathLike)):
        p = Path(source)
        files = sorted(q for q in p.rglob(f"*{suffix}") if q.is_file()) if p.is_dir() else [p]
    else:
        files = [f for s in source for f in source_files(s, suffix, missing_ok=True)]
    if not files and not missing_ok:
        raise DataFormatError(f"{source}: no {suffix + ' ' if suffix else ''}files")
    return files


def source_folder(source) -> Path:
    """The folder of a :class:`Fixture` (its ``path``), or ``source`` itself as a Path."""
    return Path(getattr(source, "path", source))


def load_specs(spec_path: str | Path | None = None) -> dict[str, dict]:
    """Read and validate the fixture spec file; returns ``{name: spec}`` (unresolved)."""
    spec_path = Path(spec_path) if spec_path else paths.specs_file()
    try:
        raw = tomllib.loads(spec_path.read_text())
    except FileNotFoundError:
        raise FixtureError(f"fixture spec file {spec_path} not found; run from a clone of the "
                           "kit (pip install -e .) or set LABKIT_SPECS") from None
    except tomllib.TOMLDecodeError as e:
        raise FixtureError(f"fixture spec file {spec_path} is not valid TOML: {e}") from None
    for name, spec in raw.items():
        kind = spec.get("kind")
        if writer_for(kind) is None:
            raise FixtureError(f"{spec_path}: fixture {name!r} has kind {kind!r}; known kinds: "
                               f"{', '.join(sorted({*WRITERS, *CHAPTER_KINDS}))}")
        missing = [s for s in SCALES if s not in spec]
        if missing:
            raise FixtureError(f"{spec_path}: fixture {name!r} has no sizes for {missing}")
        for scale in SCALES:
            resolved = resolve_spec(spec, scale)
            absent = [f for f in WRITERS[kind].required if f not in resolved]
            if absent:
                raise FixtureError(
                    f"{spec_path}: fixture {name!r} ({kind}, scale {scale}) lacks "
                    f"{', '.join(absent)}; a {kind} fixture needs "
                    f"{', '.join(WRITERS[kind].required)}")
    return raw


def resolve_spec(spec: dict, scale: str) -> dict:
    """The spec with the scale's table merged over the shared fields."""
    return {**{k: v for k, v in spec.items() if k not in SCALES}, **spec[scale]}


def _spec_hash(spec: dict) -> str:
    blob = json.dumps({"spec": spec, "generator": GENERATOR_VERSION}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def sha256_file(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _digest(files: dict) -> str:
    lines = "".join(f"{rel}\t{files[rel]['sha256']}\n" for rel in sorted(files))
    return hashlib.sha256(lines.encode()).hexdigest()


def _generate(name: str, spec: dict, scale: str, dest: Path, progress: bool) -> dict:
    """Write the fixture into a temporary folder beside ``dest`` and swap it in atomically."""
    tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    from tqdm.auto import tqdm  # here: it looks for IPython, a cost only generating pays

    writer = WRITERS[spec["kind"]]
    t0 = time.perf_counter()
    try:
        with tqdm(total=writer.estimate_bytes(spec), desc=f"{name} ({scale})", unit="B",
                  unit_scale=True, leave=False, file=sys.stderr, disable=not progress) as bar:
            meta, samples = writer.write(spec, tmp, bar.update)
        files = {}
        for p in sorted(q for q in tmp.rglob("*") if q.is_file()):
            st = p.stat()
            files[p.relative_to(tmp).as_posix()] = {
                "bytes": st.st_size, "sha256": sha256_file(p), "mtime_ns": st.st_mtime_ns}
        seconds = time.perf_counter() - t0
        nbytes = sum(f["bytes"] for f in files.values())
        manifest = {
            "name": name, "kind": spec["kind"], "scale": scale, "spec": spec,
            "spec_hash": _spec_hash(spec), "generator": GENERATOR_VERSION,
            "samples": samples, "meta": meta, "files": files, "digest": _digest(files),
            "generate_s": round(seconds, 4),
            "write_mb_per_s": round(nbytes / 1e6 / max(seconds, 1e-9), 2)}
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = dest.with_name(f".{dest.name}.old-{os.getpid()}")
    if dest.exists():
        os.replace(dest, old)
    os.replace(tmp, dest)
    shutil.rmtree(old, ignore_errors=True)
    return manifest


def verify(fx: Fixture, full: bool = False) -> list[str]:
    """The problems of a fixture's files against its manifest (none: ``[]``); a file whose size
    and mtime match is not re-hashed unless ``full``."""
    problems = []
    for rel, entry in sorted(fx.manifest["files"].items()):
        p = fx.path / rel
        try:
            st = p.stat()
        except FileNotFoundError:
            problems.append(f"{p}: missing")
            continue
        if st.st_size != entry["bytes"]:
            problems.append(f"{p}: {st.st_size} bytes, manifest says {entry['bytes']}")
        elif full or st.st_mtime_ns != entry.get("mtime_ns"):
            actual = sha256_file(p)
            if actual != entry["sha256"]:
                problems.append(
                    f"{p}: sha256 {actual[:12]}... does not match the manifest's "
                    f"{entry['sha256'][:12]}... (changed or corrupted)"
                )
    return problems


@contextlib.contextmanager
def _lock(folder: Path, name: str):
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f".{name}.lock", "w") as fh:  # closing it releases the lock
        fcntl.flock(fh, fcntl.LOCK_EX)  # two notebooks asking at once generate it once
        yield


def fixture(name: str, scale: str | None = None, *, repair: bool = False,
            verify_all: bool = False, progress: bool = True) -> Fixture:
    """Fixture ``name`` at ``scale`` (default LABKIT_SCALE), generated if missing or if its
    spec changed; files that fail :func:`verify` (every byte hashed if ``verify_all``) raise
    :class:`~labkit.FixtureError` naming them, or are regenerated if ``repair``."""
    scale = resolve_scale(scale)
    specs = load_specs()
    if name not in specs:
        raise FixtureError(
            f"no fixture named {name!r} in {paths.specs_file()}; known: {', '.join(specs)}")
    spec = resolve_spec(specs[name], scale)
    folder = paths.data_dir() / scale
    dest = folder / name
    with _lock(folder, name):
        manifest = _read_manifest(dest)
        if manifest is None or manifest.get("spec_hash") != _spec_hash(spec):
            manifest = _generate(name, spec, scale, dest, progress)
            return Fixture(name, spec["kind"], scale, dest, spec, manifest, "generated")
        fx = Fixture(name, spec["kind"], scale, dest, spec, manifest)
        problems = verify(fx, full=verify_all)
        if problems and not repair:
            shown = "\n  ".join(problems[:5])
            more = f"\n  ... and {len(problems) - 5} more" if len(problems) > 5 else ""
            raise FixtureError(
                f"fixture {name!r} ({scale}) failed verification:\n  {shown}{more}\n"
                f"Regenerate it with: labkit fixtures {name} --scale {scale} --repair")
        if problems:
            manifest = _generate(name, spec, scale, dest, progress)
            fx = replace(fx, manifest=manifest, status="repaired")
    return fx


def _read_manifest(dest: Path) -> dict | None:
    try:
        return json.loads((dest / "manifest.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None  # absent or half-written: regenerate


def ensure_fixtures(names: list[str] | None = None, scale: str | None = None, *,
                    repair: bool = False, verify_all: bool = False, progress: bool = True,
                    report: bool = True) -> dict[str, Fixture]:
    """:func:`fixture` for each name (default: all), and their table (``labkit fixtures``)."""
    out = {n: fixture(n, scale, repair=repair, verify_all=verify_all, progress=progress)
           for n in (names or load_specs())}
    if report:
        print(format_fixture_table(out.values()))
    return out


def format_fixture_table(fixtures) -> str:
    fixtures = list(fixtures)
    rows = [[fx.name, fx.status, fx.files, fx.samples, fx.nbytes / 1e6,
             fx.manifest["write_mb_per_s"]] for fx in fixtures]
    rows.append(["total", None, sum(f.files for f in fixtures), None,
                 sum(fx.nbytes for fx in fixtures) / 1e6, None])
    return text_table({"fixture": "<", "status": "<", "files": ">", "samples": ">",
                       "MB": ">.1f", "gen MB/s": ">.0f"}, rows) + f"\n(cache: {paths.data_dir()})"
