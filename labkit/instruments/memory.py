"""Per-worker memory over an epoch: USS and PSS of each DataLoader worker (chapter 03).

A forked worker shares its parent's pages until it writes to one. Python writes to an
object every time it reads it (the reference count), and its garbage collector writes to
every container it scans, so a dataset held as Python lists/dicts is copied page by page
into every worker as the epoch reads it ("copy-on-read"); a numpy or Arrow buffer is one
object and stays shared. USS (unique set size: pages only this process holds) shows the
copies; PSS divides shared pages among their users (Linux only: elsewhere ``pss`` stays
empty and :func:`labkit.facilities.why_not` says why). Introduced in chapter 03.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..facilities import has
from ..loading.loaders import worker_processes


@dataclass
class WorkerMemory:
    """Samples of each worker's USS/PSS (bytes) against batches delivered so far."""

    name: str
    batches: list[int] = field(default_factory=list)
    uss: dict[str, list[int]] = field(default_factory=dict)
    pss: dict[str, list[int]] = field(default_factory=dict)

    def growth(self, kind: str = "uss") -> dict[str, int]:
        """Last minus first sample, per worker."""
        series = getattr(self, kind)
        return {w: s[-1] - s[0] for w, s in series.items() if s}

    def mean_growth(self, kind: str = "uss") -> float:
        """Mean last-minus-first per worker; NaN where nothing was sampled (``pss`` off Linux)."""
        g = self.growth(kind)
        return sum(g.values()) / len(g) if g else float("nan")

    def summary(self) -> str:
        mib = 2 ** 20
        parts = [f"{w}: USS {self.uss[w][0] / mib:.1f} -> {self.uss[w][-1] / mib:.1f} MiB"
                 + (f", PSS {self.pss[w][0] / mib:.1f} -> {self.pss[w][-1] / mib:.1f} MiB"
                    if self.pss.get(w) else "")
                 for w in self.uss]
        return f"{self.name}: " + "; ".join(parts)


def worker_memory(loader, every: int = 4, name: str | None = None) -> WorkerMemory:
    """Run one epoch of ``loader`` (with workers) sampling each worker's memory.

    Every ``every`` batches (and at the first and the last), each live worker's
    ``psutil.Process.memory_full_info()`` gives USS and PSS. Workers are named by start
    order (``worker0``, ...). The iterator is shut down at the end.
    """
    import psutil

    out = WorkerMemory(name or type(getattr(loader, "dataset", loader)).__name__)
    pids: list[int] = []
    with_pss = has("pss")

    def sample(n: int) -> None:
        for p in sorted(worker_processes(), key=lambda p: p.pid):
            if p.pid not in pids:
                pids.append(p.pid)
        row = {}
        for pid in pids:
            try:
                info = psutil.Process(pid).memory_full_info()
            except psutil.Error:  # exited: the epoch is over for it
                continue
            row[f"worker{pids.index(pid)}"] = (info.uss, info.pss if with_pss else None)
        if not row:
            return
        out.batches.append(n)
        for w, (uss, pss) in row.items():
            out.uss.setdefault(w, []).append(uss)
            if pss is not None:
                out.pss.setdefault(w, []).append(pss)

    try:
        last = len(loader)
    except TypeError:  # an IterableDataset without __len__: sample after the loop
        last = None
    it = iter(loader)
    n = 0
    try:
        for n, _ in enumerate(it, 1):
            # the last batch is sampled inside the loop: once the iterator is exhausted,
            # non-persistent workers are gone and there is nothing left to measure
            if n == 1 or n % every == 0 or n == last:
                sample(n)
        if last is None or n != last:
            sample(n)
    finally:
        del it  # the last reference: torch stops the workers
    if not out.uss:
        raise ValueError("no worker processes to sample: use num_workers >= 1")
    return out
