"""A folder's public names imported on first use (every chapter's ``lk.FOLDER.NAME``).

``import labkit`` then loads only what the flat names need (issue 46): ``lk.images.decode_jpeg``
imports ``labkit.images.decode`` when a cell first asks for it (PEP 562, a module's
``__getattr__``).
"""

from __future__ import annotations

import importlib


def submodule(package: str, name: str):
    """``package.name`` imported on first use (``lk.tokens``, ``lk.images.gpu``); an
    AttributeError where there is no such module, as for any missing attribute."""
    if name.startswith("_"):
        raise AttributeError(name)
    try:
        return importlib.import_module(f"{package}.{name}")
    except ModuleNotFoundError as e:
        if e.name != f"{package}.{name}":
            raise
        raise AttributeError(f"module {package!r} has no attribute {name!r}") from None


def lazy_names(package: str, names: dict[str, str]):
    """``(__all__, __getattr__, __dir__)`` for a folder's ``__init__``: ``names`` maps each
    public name to the module (within ``package``) that defines it; any other name is a
    submodule, imported on first use."""
    def __getattr__(name: str):
        if name not in names:
            return submodule(package, name)
        return getattr(importlib.import_module(f"{package}.{names[name]}"), name)

    def __dir__():
        return sorted(names)

    return sorted(names), __getattr__, __dir__
