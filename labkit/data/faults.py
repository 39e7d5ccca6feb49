"""Damaged copies of fixture files, for "what goes wrong" (ch. 02, 05-07, 10, 12, 14-16)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

HOW = ("truncate", "flip", "zero", "delete")


def damage(path: str | os.PathLike, how: str, at: float = 0.5, length: int = 64) -> Path:
    """Damage one file in place (never a cached fixture): ``truncate`` at fraction ``at``,
    ``flip`` or ``zero`` ``length`` bytes from there, or ``delete`` it."""
    path = Path(path)
    if how not in HOW:
        raise ValueError(f"how={how!r}: choose one of {', '.join(HOW)}")
    if not 0 <= at < 1:
        raise ValueError(f"at={at!r}: a fraction of the file size, 0 <= at < 1")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file to damage")
    size = path.stat().st_size
    pos = int(size * at)
    if how == "delete":
        path.unlink()
    elif how == "truncate":
        os.truncate(path, pos)
    else:
        with open(path, "r+b") as f:
            f.seek(pos)
            chunk = f.read(length)
            f.seek(pos)
            f.write(bytes(b ^ 0xFF for b in chunk) if how == "flip" else bytes(len(chunk)))
    return path


def damaged_copy(src: str | os.PathLike, dest: str | os.PathLike, how: str, *,
                 file: str | None = None, at: float = 0.5, length: int = 64) -> Path:
    """Copy ``src`` (a file, or a folder or :class:`~labkit.Fixture` and its member ``file``)
    over ``dest`` and :func:`damage` the copy; returns the damaged file."""
    src = Path(getattr(src, "path", src))
    dest = Path(dest)
    if dest.is_dir():
        shutil.rmtree(dest)
    elif dest.exists():
        dest.unlink()
    dest.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        if file is None:
            raise ValueError(f"{src} is a folder: name the member to damage with file=")
        if not (src / file).is_file():
            raise FileNotFoundError(f"{src / file}: no such file in {src}")
        shutil.copytree(src, dest)
        target = dest / file
    elif src.is_file():
        shutil.copy2(src, dest)
        target = dest
    else:
        raise FileNotFoundError(f"{src}: no such file or folder")
    return damage(target, how, at=at, length=length)
