"""A folder's public names imported on first use (every chapter's ``lk.FOLDER.NAME``).

``import labkit`` then loads only what the flat names need (issue 46): ``lk.images.decode_jpeg``
imports ``labkit.images.decode`` when a cell first asks for it (PEP 562, a module's
``__getattr__``).
"""

from __future__ import annotations

import importlib


def lazy_names(package: str, names: dict[str, str]):
    """``(__all__, __getattr__, __dir__)`` for a folder's ``__init__``: ``names`` maps each
    public name to the module (within ``package``) that defines it."""
    def __getattr__(name: str):
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{names[name]}"), name)

    def __dir__():
        return sorted(names)

    return sorted(names), __getattr__, __dir__
