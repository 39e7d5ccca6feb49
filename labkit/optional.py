"""Optional libraries: is one here, and if not, why and what to install (ch. 02, 03, 09-16).

Each check is registered with :func:`check` in the module that knows the library (HOMES)."""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import importlib.util
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import facilities
from .errors import LabkitError
from .facilities import ptrace_scope

_CHECKS: dict[str, Callable[..., tuple[bool, str]]] = {}  # filled by check() at import
HOMES = {  # where each check is registered
    **dict.fromkeys(("gpu_decode", "kornia_gpu", "dali"), "labkit.images.gpu"),
    "torchvision": "labkit.images.augment",
    **dict.fromkeys(("torchcodec", "ffmpeg", "pyav", "spdl", "media_gpu"),
                    "labkit.media.backends"),
    **dict.fromkeys(("mosaicml_streaming", "litdata", "ray_data"), "labkit.objstore.systems"),
}


def check(name: str):
    """Register the decorated function (never raising) as the check ``lk.status(name)``."""
    def register(fn: Callable[..., tuple[bool, str]]):
        old, new = (f"{f.__module__}.{f.__qualname__}" for f in (_CHECKS.get(name, fn), fn))
        if old != new:
            raise LabkitError(f"two checks named {name!r}: {old} and {new}")
        _CHECKS[name] = fn
        return fn
    return register


def status(name: str, **options) -> tuple[bool, str]:
    """``(True, what is here)`` if the library, device or Linux-only facility ``name`` can be
    used, else ``(False, why not and what to install)``; an unknown ``name`` raises."""
    if name in facilities.WHY:     # a Linux-only facility (``"fadvise"``, ``"proc"``, ...)
        return (True, f"{name}: here") if facilities.has(name) else (
            False, facilities.why_not(name))
    if name not in _CHECKS and name in HOMES:
        importlib.import_module(HOMES[name])   # registers it
    probe = _CHECKS.get(name)
    if probe is None:
        raise LabkitError(f"no check named {name!r}; the known ones: "
                          f"{', '.join(sorted({*_CHECKS, *HOMES, *facilities.WHY}))}")
    return probe(**options)


def library_status(dist: str, *modules: str, install: str, load: bool = True,
                   label: str | None = None,
                   importer: Callable[[str], object] | None = None) -> tuple[bool, str]:
    """``(True, "<label> <version>")`` if ``dist``'s ``modules`` load, else ``(False, why;
    install)``, never raising; ``load=False`` only looks (lance is not fork-safe)."""
    label = label or dist
    for mod in modules or (dist,):
        top = mod.partition(".")[0]  # find_spec("a.b") would import a
        try:
            found = importlib.util.find_spec(top) is not None
        except (ImportError, ValueError):  # a broken entry in sys.modules
            found = False
        if not found:
            return False, f"{label} is not installed ({top} not found); {install}"
    if load:
        for mod in modules or (dist,):
            try:
                (importer or importlib.import_module)(mod)
            except Exception as e:  # noqa: BLE001 - a mismatched build raises anything
                why = f"{type(e).__name__}: {' '.join(str(e).split())[:120]}"
                return False, f"{label} does not load here ({why}); {install}"
    return True, f"{label} {library_version(dist, *modules)}"


def library_version(dist: str, *modules: str) -> str:
    """``dist``'s version, else that of its top-level module's distribution (tensorflow)."""
    for name in (dist, *(m.split(".")[0] for m in modules)):
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "(version unknown)"


# -- chapter 12b's formats (load=False: lance makes later forks unsafe; TF and tfrecord clash)

_FORMATS_EXTRA = 'pip install -e ".[moreformats]"'


def _library_check(name: str, *args, **kwargs) -> None:
    check(name)(lambda: library_status(*args, **kwargs))


_library_check("lance", "pylance", "lance", label="pylance", load=False,
               install=f"{_FORMATS_EXTRA} or pip install pylance")
_library_check("array_record", "array-record", "array_record.python.array_record_module",
               install=f"{_FORMATS_EXTRA} or pip install array-record")
_library_check("safetensors", "safetensors", install="pip install safetensors")
_library_check("tfdata", "tensorflow-cpu", "tensorflow", label="tensorflow", load=False,
               install="tf.data is the optional extra: pip install "
                       "'labkit[tfdata]' (tensorflow-cpu, ~600 MB)")


# -- chapter 13: py-spy samples a running worker from outside (ptrace); tried once on a child

@check("pyspy")
@functools.cache
def _pyspy_status() -> tuple[bool, str]:
    here = Path(sys.executable).parent / "py-spy"  # a venv not activated
    exe = shutil.which("py-spy") or (str(here) if here.exists() else None)
    if exe is None:
        return False, "py-spy is not installed (pip install py-spy)"
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.3)
        r = subprocess.run([exe, "dump", "--pid", str(child.pid)], capture_output=True,
                           text=True, timeout=30)
        if r.returncode == 0:
            v = subprocess.run([exe, "--version"], capture_output=True, text=True)
            return True, v.stdout.strip() or "py-spy"
        err = (r.stderr or r.stdout).strip().splitlines()
        scope = ptrace_scope()
        hint = f"; ptrace_scope is {scope}" if scope is not None else ""
        return False, (f"py-spy may not read other processes here: "
                       f"{err[-1] if err else 'exit ' + str(r.returncode)}{hint} "
                       "(needs ptrace: ptrace_scope 0, root, or CAP_SYS_PTRACE)")
    except subprocess.TimeoutExpired:
        return False, "py-spy did not answer within 30 s"
    finally:
        child.kill()
        child.wait()


# -- CUDA (the spine's own check: chapters 09, 10, 13, 16 ask) ---------------------------

@check("cuda")
def _cuda_status(device: Any = None) -> tuple[bool, str]:
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure means "no CUDA here"
        return False, f"torch cannot be imported ({type(e).__name__}: {e})"
    if torch.version.cuda is None:
        return False, (f"torch {torch.__version__} is a CPU-only build (torch.version.cuda is "
                       "None): no CUDA streams, no pinned memory to copy from")
    if not torch.cuda.is_available():
        return False, (f"torch {torch.__version__} was built for CUDA {torch.version.cuda}, "
                       "but no CUDA device is visible (torch.cuda.is_available() is False)")
    try:  # a malformed or absent device ("cuda:7") is a reason, not an exception
        dev = torch.device(device if device is not None else "cuda")
        if dev.type != "cuda":
            return False, f"device {dev} is not a CUDA device"
        name = torch.cuda.get_device_name(dev)
    except Exception as e:  # noqa: BLE001
        return False, f"device {device!r} cannot be used ({type(e).__name__}: {e})"
    return True, f"CUDA {torch.version.cuda}: {name}"
