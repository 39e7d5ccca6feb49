"""labkit's and each folder's public names imported on first use (every chapter's ``lk.NAME``
and ``lk.FOLDER.NAME``).

``import labkit`` then loads labkit and this module only (issue 46): ``lk.images.decode_jpeg``
imports ``labkit.images.decode`` when a cell first asks for it (PEP 562, a module's
``__getattr__``).
"""

from __future__ import annotations

import importlib
import pkgutil
import sys


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
    """``(__all__, __getattr__, __dir__)`` for a package's ``__init__``: ``names`` maps each
    public name to the module (within ``package``) that defines it; any other name is a
    submodule, imported on first use. A name once resolved is kept in the package, so the
    next ``lk.NAME`` is a plain attribute; ``dir()`` lists the names and the submodules (tab
    completion)."""
    def __getattr__(name: str):
        if name not in names:
            return submodule(package, name)
        value = getattr(importlib.import_module(f"{package}.{names[name]}"), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__():
        subs = {m.name for m in pkgutil.iter_modules(sys.modules[package].__path__)
                if not m.name.startswith("_")}
        return sorted(set(names) | subs)

    return sorted(names), __getattr__, __dir__
