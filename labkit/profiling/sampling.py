"""Inside a running worker: a sampling profile with py-spy, or the fallback and why (chapter 13).

A DataLoader worker is another process, so neither cProfile nor torch.profiler in the
training loop sees what it does. py-spy reads a running Python process's stacks from
outside (``ptrace`` / ``process_vm_readv``), ~100 times a second, without changing it.
That needs permission: the same user and ``/proc/sys/kernel/yama/ptrace_scope`` 0 (or
root, or ``CAP_SYS_PTRACE``; in Docker ``--cap-add SYS_PTRACE``). Where it is refused, the
fallback is what ``labkit diagnose`` does: the same data path under cProfile in this
process with ``num_workers=0``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..display.figures import done, subplots
from ..facilities import ptrace_scope
from ..loading.loaders import worker_processes
from ..optional import check
from .hotspots import Hotspot, profile_in_process
from .rebuild import rebuild_loader

_status: dict = {}


def pyspy_path() -> str | None:
    """The py-spy executable: on PATH, or next to this interpreter (a venv not activated)."""
    here = Path(sys.executable).parent / "py-spy"
    return shutil.which("py-spy") or (str(here) if here.exists() else None)


@check("pyspy")
def _pyspy_status() -> tuple[bool, str]:
    """``(True, version)`` if py-spy can sample a child process here, else ``(False, why)``."""
    if "result" in _status:
        return _status["result"]
    exe = pyspy_path()
    if exe is None:
        result = (False, "py-spy is not installed (pip install py-spy)")
    else:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        try:
            time.sleep(0.3)
            r = subprocess.run([exe, "dump", "--pid", str(child.pid)], capture_output=True,
                               text=True, timeout=30)
            if r.returncode == 0:
                v = subprocess.run([exe, "--version"], capture_output=True, text=True)
                result = (True, v.stdout.strip() or "py-spy")
            else:
                err = (r.stderr or r.stdout).strip().splitlines()
                scope = ptrace_scope()
                hint = f"; ptrace_scope is {scope}" if scope is not None else ""
                result = (False, f"py-spy may not read other processes here: "
                                 f"{err[-1] if err else 'exit ' + str(r.returncode)}{hint} "
                                 "(needs ptrace: ptrace_scope 0, root, or CAP_SYS_PTRACE)")
        except subprocess.TimeoutExpired:
            result = (False, "py-spy did not answer within 30 s")
        finally:
            child.kill()
            child.wait()
    _status["result"] = result
    return result


@dataclass
class WorkerSample:
    """Stacks sampled from a loader's workers (or the fallback's hotspots, and why)."""

    sampled: bool
    how: str
    stacks: dict[str, int] = field(default_factory=dict)  # "f (file:line);g (...)" -> samples
    pids: list[int] = field(default_factory=list)
    fallback: list[Hotspot] = field(default_factory=list)

    @property
    def samples(self) -> int:
        return sum(self.stacks.values())

    def top(self, n: int = 5) -> list[tuple[str, float]]:
        """The innermost functions (where the worker was) by share of samples."""
        import re

        leaf: dict[str, int] = {}
        for stack, k in self.stacks.items():
            f = re.sub(r":\d+\)$", ")", stack.rsplit(";", 1)[-1])  # lines of one function: one
            leaf[f] = leaf.get(f, 0) + k
        total = self.samples or 1
        return [(f, k / total) for f, k in sorted(leaf.items(), key=lambda kv: -kv[1])[:n]]

    def plot(self, title: str | None = None, min_share: float = 0.01):
        """A flame graph (icicle: callers on top) of the sampled stacks."""
        fig, ax = subplots(figsize=(10, 4))
        total = self.samples or 1
        tree: dict = {}
        for stack, k in self.stacks.items():
            node = tree
            for frame in stack.split(";"):
                node = node.setdefault(frame, {"_n": 0})
                node["_n"] += k
        depth_max = [0]

        def draw(node, x, depth):
            for frame, child in sorted(((f, c) for f, c in node.items() if f != "_n"),
                                       key=lambda fc: -fc[1]["_n"]):
                w = child["_n"] / total
                if w >= min_share:
                    ax.barh(-depth, w, left=x, height=0.9, color=_color(frame),
                            edgecolor="white", linewidth=0.5)
                    if w > 0.08:
                        ax.text(x + 0.005, -depth, frame.split(" (")[0][:int(w * 120)],
                                va="center", fontsize=7)
                    depth_max[0] = max(depth_max[0], depth)
                    draw(child, x, depth + 1)
                x += w

        draw(tree, 0.0, 0)
        ax.set_xlim(0, 1)
        ax.set_yticks([])
        ax.set_xlabel(f"share of {total} samples ({len(self.pids)} worker(s))")
        ax.set_title(title or "where the workers spent their time (callers on top)")
        return done(fig)


def _color(frame: str) -> str:
    import zlib

    palette = ["#F2A65A", "#EEC170", "#F58549", "#E9724C", "#FFC857", "#F4A259"]
    return palette[zlib.crc32(frame.split(" (")[0].encode()) % len(palette)]


def sample_workers(loader, *, seconds: float = 2.0, step=None, rate: int = 100,
                   idle: bool = False) -> WorkerSample:
    """Sample every worker of ``loader`` with py-spy for ``seconds`` while the loop runs.

    ``idle=True`` keeps samples of threads that are waiting (sleep, I/O): needed to see a
    worker that waits on storage, noise otherwise. Without py-spy permission, or without
    workers, the data path is profiled in this process instead (``fallback``), and
    ``how`` says why.
    """
    ok, why = _pyspy_status()
    if not ok or getattr(loader, "num_workers", 0) == 0:
        reason = why if not ok else "the loader has no workers"
        hs, _ = profile_in_process(iter(rebuild_loader(loader, num_workers=0)), 10)
        return WorkerSample(False, f"fallback, cProfile in this process: {reason}",
                            fallback=hs)
    before = {p.pid for p in worker_processes()}
    out = Path(tempfile.mkdtemp(prefix="labkit-pyspy-"))
    it = iter(loader)
    procs = []
    try:
        next(it)  # the workers are up
        pids = [p.pid for p in worker_processes() if p.pid not in before]
        for pid in pids:
            cmd = [pyspy_path(), "record", "--pid", str(pid), "--duration",
                   str(max(1, round(seconds))), "--rate", str(rate), "--format", "raw",
                   "--output", str(out / f"{pid}.txt"), "--nonblocking"]
            procs.append(subprocess.Popen(cmd + (["--idle"] if idle else []),
                                          stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))
        deadline = time.monotonic() + seconds + 30
        for batch in it:
            if step is not None:
                step(batch)
            if all(p.poll() is not None for p in procs) or time.monotonic() > deadline:
                break
    finally:
        del it  # the last reference: torch stops the workers (persistent ones stay the loader's)
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    stacks: dict[str, int] = {}
    for f in out.glob("*.txt"):
        for line in f.read_text().splitlines():
            stack, _, n = line.rpartition(" ")
            # a forked worker still carries the frames that forked it: start at its loop
            cut = stack.find("_worker_loop (")
            stack = stack[cut:] if cut >= 0 else stack
            if stack and n.isdigit():
                stacks[stack] = stacks.get(stack, 0) + int(n)
    shutil.rmtree(out, ignore_errors=True)
    how = f"py-spy, {rate} samples/s, {len(pids)} worker(s), pid {os.getpid()}'s children"
    if not stacks:
        how += " (no samples: the pass ended before py-spy attached; give it more batches)"
    return WorkerSample(bool(stacks), how, stacks=stacks, pids=pids)
