"""Launch a real multi-process job with torchrun from a notebook, safely (chapters 04, 11).

A timeout kills every rank's session: killing torchrun's group alone left them running (CI)."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from ..errors import LabkitError

# The guard: under spawn and forkserver each DataLoader worker re-imports this as __mp_main__.
_STUB = ('from {module} import main\n\n'
         'if __name__ == "__main__":\n    main()\n')


def _kill_tree(pid: int) -> None:
    groups = [pid]
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(pid).children(recursive=True):
            with contextlib.suppress(OSError):
                if (group := os.getpgid(child.pid)) not in groups:
                    groups.append(group)
    for group in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)


@dataclass
class TorchrunResult:
    """What a :func:`torchrun` launch did: exit code, per-rank JSON results, output."""

    returncode: int
    ranks: list[dict] = field(default_factory=list)
    output: str = ""
    wall_s: float = 0.0
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def deliveries(self, key: str) -> list:
        """``(source, ids)`` pairs of every rank for one part of the job, for ``lk.audit``."""
        parts = [r[key]["deliveries"] if isinstance(r[key], dict) else r[key] for r in self.ranks]
        return [pair for part in parts for pair in part]

    def tail(self, lines: int = 15) -> str:
        return "\n".join(self.output.strip().splitlines()[-lines:])


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(job: str, *, module: str, nproc: int = 2, timeout: float = 120.0,
             **params) -> TorchrunResult:
    """``main()`` of ``module`` on ``nproc`` ranks, given ``{"job", "out": folder, **params}``."""
    if importlib.util.find_spec(module) is None:
        raise LabkitError(f"torchrun: no module {module!r} on sys.path (write the job first)")
    with tempfile.TemporaryDirectory(prefix="labkit-torchrun-", ignore_cleanup_errors=True) as d:
        tmp = Path(d)
        (tmp / "job.py").write_text(_STUB.format(module=module))
        (tmp / "config.json").write_text(json.dumps({"job": job, "out": str(tmp), **params}))
        # --log-dir: without it torchrun makes a torchelastic_* folder in /tmp and leaves it
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}",
               "--nnodes=1", "--master-addr=127.0.0.1", f"--master-port={free_port()}",
               f"--log-dir={tmp / 'logs'}", str(tmp / "job.py"), str(tmp / "config.json")]
        env = {k: v for k, v in os.environ.items() if k != "TORCHELASTIC_ERROR_FILE"}
        # the ranks import what this process does (as spawn workers get its sys.path)
        env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1",
                   PYTHONPATH=os.pathsep.join(filter(None, sys.path)))
        t0 = time.perf_counter()
        # own session; a timeout kills it and every rank's session too (_kill_tree)
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, env=env, cwd=tmp, start_new_session=True)
        timed_out = False
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_tree(proc.pid)
            out, _ = proc.communicate(timeout=60)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # stragglers of a finished launch
        ranks = [json.loads(p.read_text())
                 for p in sorted(tmp.glob("rank*.json"), key=lambda p: int(p.stem[4:]))]
        result = TorchrunResult(proc.returncode, ranks, out, time.perf_counter() - t0,
                                timed_out)
    failed = [r["traceback"] for r in result.ranks if "traceback" in r]
    if failed:
        raise LabkitError(f"torchrun job {job!r} failed on {len(failed)} rank(s), the first:\n"
                          f"{failed[0]}\n--- output ---\n{result.tail()}")
    if not result.ranks and not result.timed_out:
        raise LabkitError(f"torchrun job {job!r} wrote no results (exit "
                          f"{result.returncode}):\n{result.tail()}")
    return result
