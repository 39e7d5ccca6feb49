"""``labkit bench bakeoff``: every installed loader over the same images (chapter 16)."""

from __future__ import annotations

import os

from ...capstone.bakeoff.data import cleanup_bakeoff, prepare_bakeoff
from ...capstone.bakeoff.runner import AGAIN, run_bakeoff
from ...capstone.pipeline import image_train_step
from ...data.fixtures import fixture
from ...instruments.stats import FAIL, PASS
from ...instruments.tuning import usable_cores
from ...records.machine import versions
from ...scale import resolve_scale
from .registry import benchmark


@benchmark("bakeoff", goal="every installed loader delivers every id exactly once; ratios "
                          "against torch map-style measured in the same run")
def bakeoff_bench(scale: str | None = None, samples: int | None = 2000,
                  num_workers: int | None = None, batch_size: int = 32, repeats: int = 2,
                  names=None) -> dict:
    """Every installed loader over the same images with the same train step (chapter 16).

    The torch map-style DataLoader is measured first and again last, in the same run; each
    loader's ratio is whole-pass samples/s over the mean of the two (``baseline_drift``: the
    second over the first). Skipped libraries are listed with why.
    The verdict is the exactly-once audit of every loader that ran (deterministic; speed is
    reported, not judged: which library is fastest depends on the machine). ``samples``:
    images per pass, at most the fixture's (None: all of them). As in chapter 16:
    ``num_workers`` defaults to one per usable core, and the step runs on the GPU where torch
    sees one (on the CPU it shares the cores with the workers).
    """
    import tempfile

    import torch

    scale = resolve_scale(scale)
    num_workers = usable_cores() if num_workers is None else num_workers
    device = "cuda" if torch.cuda.is_available() else "cpu"
    images = fixture("images", scale, progress=False)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the step on one core: the workers get the others
    data = prepare_bakeoff(images, tempfile.mkdtemp(prefix="labkit-bakeoff-"), samples=samples,
                           shards=max(4, 2 * num_workers))
    try:
        step = image_train_step(classes=images.meta["classes"], device=device)
        results = run_bakeoff(data, step, names=names, batch_size=batch_size,
                              num_workers=num_workers, repeats=repeats)
    finally:
        torch.set_num_threads(threads)
        cleanup_bakeoff(data)
    ran = [r for r in results if r.ok]
    ok = bool(ran) and all(r.audit.ok for r in ran)
    return {
        "scale": scale,
        "samples": data.samples,
        "num_workers": num_workers,
        "train_step": step.label,
        "batch_size": batch_size,
        "baseline": results[0].name,
        "baseline_samples_per_s": results[0].samples_per_s,
        # the baseline measured again at the end: far from 1, the machine changed mid-run
        "baseline_drift": (results[-1].samples_per_s / results[0].samples_per_s
                           if results[-1].name.endswith(AGAIN) and results[-1].ok else None),
        "loaders": [r.as_dict() for r in results],
        "ratios": {r.name: round(r.ratio, 3) for r in ran},
        "skipped": {r.name: r.skipped for r in results if r.skipped},
        "failed": {r.name: r.error for r in results if r.error},
        "conversion_s": {k: round(v, 3) for k, v in data.conversion_s.items()},
        "versions": versions(["torch", "webdataset", "datasets", "pyarrow", "torchdata", "lmdb",
                              "h5py"]),
        "cpu_count": os.cpu_count(),
        "verdict": PASS if ok else FAIL,
        "goal_met": ok,
    }
