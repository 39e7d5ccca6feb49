"""What machine and which versions a measurement ran on, as a JSON-ready dict (ch. 00, 16).

Every checkpoint record embeds it; a probe that fails reports its error, never raises."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import multiprocessing as mp
import os
import platform
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import psutil

from .. import facilities, paths
from .table import text_table

DEFAULT_NAMES = ("python", "labkit", "torch", "numpy", "webdataset", "datasets", "pyarrow",
                 "albumentations", "opencv-python-headless", "pillow", "ipywidgets", "matplotlib",
                 "jupyterlab", "nbval", "nbclient", "ipykernel", "psutil", "threadpoolctl", "tqdm",
                 "torchdata", "torchvision", "torchcodec", "kornia", "nvidia-dali-cuda120",
                 "nvidia-dali-cuda130", "mosaicml-streaming", "litdata", "ray", "petastorm",
                 "simplejpeg")
_KEY_VERSIONS = ("torch", "numpy", "pyarrow", "webdataset", "datasets", "pillow")


def _pyproject_version() -> str | None:
    # A checkout without `pip install -e .` has no metadata; pyproject.toml has the version.
    try:
        import tomllib

        text = (paths.REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8")
        return tomllib.loads(text)["project"]["version"]
    except Exception:
        return None


def versions(names=None) -> dict[str, str | None]:
    """Installed versions from package metadata, never imported (None when absent)."""
    out: dict[str, str | None] = {}
    for name in DEFAULT_NAMES if names is None else names:
        if name == "python":
            out[name] = platform.python_version()
            continue
        try:
            out[name] = importlib.metadata.version(name)
        except Exception:  # PackageNotFoundError, or metadata broken by a bad install
            out[name] = _pyproject_version() if name == "labkit" else None
    return out


def _safe(probe, *args) -> dict:
    try:
        return probe(*args)
    except Exception as exc:  # one odd machine must not stop a chapter
        return {"error": f"{type(exc).__name__}: {exc}"}


def _cpu() -> dict:
    try:
        lines = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        lines = []
    model = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("model name")),
                 None)
    affinity = sorted(os.sched_getaffinity(0)) if facilities.has("affinity") else None
    return {"model": model or platform.processor() or platform.machine() or None,
            "logical_cores": psutil.cpu_count(logical=True),
            "physical_cores": psutil.cpu_count(logical=False), "affinity": affinity}


def threadpools() -> list[dict]:
    # threadpoolctl inspects the libraries already mapped: the pools loaded, none imported.
    from threadpoolctl import threadpool_info

    keys = ("user_api", "internal_api", "num_threads", "version")
    return [{k: info.get(k) for k in keys} for info in threadpool_info()]


def _data(data_path) -> dict:
    path = Path(data_path if data_path is not None else paths.data_dir())
    path = existing = path.expanduser().resolve()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    part = max((p for p in psutil.disk_partitions(all=True)
                if existing.is_relative_to(p.mountpoint)),
               key=lambda p: len(p.mountpoint), default=None)
    usage = psutil.disk_usage(str(existing))
    return {"path": str(path), "existing": str(existing), "filesystem": part and part.fstype,
            "mount_point": part and part.mountpoint, "free_bytes": usage.free,
            "total_bytes": usage.total}


def _nvidia_smi() -> tuple[list[dict], str | None, str]:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return [], None, "nvidia-smi not found"
    # Drivers older than 510 do not know compute_cap and reject the whole query.
    for fields in ("name,driver_version,memory.total,compute_cap",
                   "name,driver_version,memory.total"):
        try:
            out = subprocess.run([exe, f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True, timeout=5, check=True).stdout
            break
        except (OSError, subprocess.SubprocessError) as exc:
            # Its own message ("couldn't communicate with the driver") says what to fix.
            error = (getattr(exc, "stderr", None) or getattr(exc, "stdout", None) or "").strip()
            error = error.splitlines()[-1] if error else str(exc)
    else:
        return [], None, f"nvidia-smi failed: {error}"
    devices, driver = [], None
    for line in filter(None, (ln.strip() for ln in out.splitlines())):
        name, driver, mib, cap = ([p.strip() for p in line.split(",")] + [""] * 4)[:4]
        mem = int(float(mib)) * 2**20 if mib.replace(".", "").isdigit() else None
        devices.append({"name": name, "memory_bytes": mem, "capability": cap or None})
    return devices, driver, "nvidia-smi lists no GPU"


def _torch_cuda() -> tuple[list[dict], str | None, str]:
    if importlib.util.find_spec("torch") is None:
        return [], None, "torch is not installed"
    import torch

    if not torch.cuda.is_available():
        build = f"CUDA {torch.version.cuda} build" if torch.version.cuda else "CPU build"
        return [], None, f"torch.cuda.is_available() is False ({build} {torch.__version__})"
    props = map(torch.cuda.get_device_properties, range(torch.cuda.device_count()))
    return [{"name": p.name, "memory_bytes": p.total_memory, "capability": f"{p.major}.{p.minor}"}
            for p in props], torch.version.cuda, ""


def _probe(probe) -> tuple[list[dict], str | None, str]:
    try:
        return probe()
    except Exception as exc:  # a half-installed driver or torch: report, do not raise
        return [], None, f"{probe.__name__.strip('_')} probe failed: {exc}"


def _gpu() -> dict:
    smi_devices, driver, smi_reason = _probe(_nvidia_smi)
    torch_devices, cuda, torch_reason = _probe(_torch_cuda)
    devices = torch_devices or smi_devices
    if not devices:
        return {"available": False, "reason": f"{smi_reason}; {torch_reason}"}
    gpu = {"available": True, "devices": devices, "driver": driver, "cuda": cuda}
    if not torch_devices:  # the card is there but this torch cannot use it
        gpu["note"] = torch_reason
    return gpu


def _torch() -> dict:
    torch = sys.modules.get("torch")
    if torch is None:
        return {"loaded": False}
    # get_num_interop_threads does not start the pool, so a later set_ still works.
    return {"loaded": True, "version": torch.__version__, "num_threads": torch.get_num_threads(),
            "interop_threads": torch.get_num_interop_threads()}


def environment(data_path=None) -> dict:
    """Hardware, OS, thread pools, data, GPU, versions, start method: a JSON-ready dict."""
    mem = psutil.virtual_memory()
    libc = " ".join(platform.libc_ver()).strip() or None
    return {
        "hostname": socket.gethostname(),
        "python": {"version": platform.python_version(),
                   "implementation": platform.python_implementation()},
        "os": {"system": platform.system(), "release": platform.release(),
               "machine": platform.machine(), "libc": libc},
        "cpu": _safe(_cpu),
        "memory": {"total_bytes": mem.total, "available_bytes": mem.available},
        # Before the GPU probe, which may import torch and load its OpenMP runtime.
        "threadpools": _safe(threadpools),
        "data": _safe(_data, data_path), "gpu": _safe(_gpu), "torch": _safe(_torch),
        "versions": versions(),
        # allow_none: get_start_method() alone would fix it (a later set_start_method fails)
        "start_method": mp.get_start_method(allow_none=True) or mp.get_all_start_methods()[0],
    }


def human_bytes(n) -> str:
    """``1536`` -> ``'1.5 KiB'``; None -> ``'?'``."""
    if n is None:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def gpu_line(gpu: dict) -> str:
    """One line for a GPU section: names and memory, or ``no GPU: <reason>``."""
    if not gpu.get("available"):
        return f"no GPU: {gpu.get('reason') or gpu.get('error', 'unknown')}"
    names = ", ".join(f"{d['name']} ({human_bytes(d.get('memory_bytes'))})"
                      for d in gpu["devices"])
    return f"{names}; driver {gpu.get('driver') or '?'}, CUDA {gpu.get('cuda') or '?'}"


def format_environment(env: dict) -> str:
    """A short human summary of :func:`environment` for chapter 00 and ``labkit env``."""
    cpu, mem, data, osd = env["cpu"], env["memory"], env["data"], env["os"]
    ver = env.get("versions", {})
    aff = cpu.get("affinity")
    pools = ", ".join(f"{p['internal_api']} x{p['num_threads']}" for p in env["threadpools"]
                      if isinstance(p, dict) and "internal_api" in p)
    torch = env.get("torch", {})
    rows = [
        ["machine", f"{env['hostname']}: {osd['system']} {osd['release']} {osd['machine']}"
         + (f", {osd['libc']}" if osd.get("libc") else "")],
        ["cpu", f"{cpu.get('model')}"],
        ["cores", f"{cpu.get('logical_cores')} logical, {cpu.get('physical_cores')} physical"
         + (f", {len(aff)} usable by this process" if aff else "")],
        ["memory", f"{human_bytes(mem['total_bytes'])} total, "
                   f"{human_bytes(mem['available_bytes'])} available"],
        ["gpu", gpu_line(env["gpu"])],
        ["data", f"{data.get('path', data.get('error'))}"],
        ["", f"on {data.get('filesystem')} mounted at {data.get('mount_point')}, "
             f"{human_bytes(data.get('free_bytes'))} free of "
             f"{human_bytes(data.get('total_bytes'))}"],
        ["python", f"{env['python']['version']} ({env['python']['implementation']})"],
    ]
    if torch.get("loaded"):
        rows.append(["torch", f"{torch['version']}, {torch['num_threads']} threads, "
                              f"{torch['interop_threads']} interop threads"])
    rows.append(["pools", pools or "none loaded yet"])
    rows.append(["versions", ", ".join(f"{n} {ver.get(n) or '-'}" for n in _KEY_VERSIONS)])
    missing = [n for n, v in ver.items() if v is None]
    if missing:
        rows.append(["absent", ", ".join(missing)])
    return text_table({"what": "<", "found": "<"}, rows, header=False, sep=" ")
