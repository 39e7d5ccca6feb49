"""``labkit bench webdataset``: WebDataset against plain tarfile, 1 vs 2 workers (chapter 06)."""

from __future__ import annotations

import os
import tarfile
from itertools import groupby

import webdataset as wds
from torch.utils.data import DataLoader

from labkit.data.fixtures import fixture
from labkit.instruments.stats import judge, paired_trials
from labkit.instruments.tuning import usable_cores
from labkit.loading.loaders import WORKER_TIMEOUT_S
from labkit.scale import resolve_scale

from .ceiling import available_parallelism, busy_verdict
from .registry import benchmark

READ_GOAL = 0.8
WORKERS_GOAL = 1.6


def _tarfile_samples(shards) -> int:
    """The baseline: stream each shard with plain ``tarfile``, group members into samples."""
    n = 0
    for shard in shards:
        with tarfile.open(shard, "r|") as tar:  # "r|": a stream, as over a network
            files = (m for m in tar if m.isfile())
            for _, members in groupby(files, key=lambda m: m.name.partition(".")[0]):
                # read as they stream past: a "r|" member cannot be read once the next is out
                sample = {m.name.partition(".")[2]: tar.extractfile(m).read() for m in members}
                n += bool(sample)
    return n


def _wds_samples(shards) -> int:
    return sum(1 for _ in wds.WebDataset([str(s) for s in shards], shardshuffle=False,
                                         empty_check=False))


def _decoding_loader(shards, num_workers: int):
    """JPEG + label + array decoded in ``num_workers`` persistent workers: tensors
    (``torchrgb8``) travel through shared memory, numpy arrays would be pickled."""
    ds = (wds.WebDataset([str(s) for s in shards], shardshuffle=False, empty_check=False)
          .decode("torchrgb8").to_tuple("jpg", "cls", "npy").batched(32, partial=True))
    return DataLoader(ds, batch_size=None, num_workers=num_workers, persistent_workers=True,
                      timeout=WORKER_TIMEOUT_S)


@benchmark("webdataset", goal=f"no-decode read >= {READ_GOAL}x Python tarfile (ceiling ~1x: "
                              "the same tar parsing plus the library's per-sample work); "
                              f"2 workers >= {WORKERS_GOAL}x 1 worker in steady state (ceiling "
                              "min(2, cores)x: 2x on 2 idle cores, less the main process's "
                              "share, measured as workers_2_vs_1_ceiling: inconclusive when "
                              "it is below the goal); medians of paired ratios, 95% intervals")
def webdataset_bench(scale: str | None = None, pairs: int = 15, worker_pairs: int = 9,
                     epochs: int = 2) -> dict:
    """WebDataset against plain ``tarfile`` (no decode, warm page cache; CPU clock), and 1 vs
    2 warmed decoding workers (wall clock) against the machine's parallelism (:mod:`.ceiling`)."""
    scale = resolve_scale(scale)
    fx = fixture("wds", scale, progress=False)
    shards = fx.file_list(".tar")
    n_tar = _tarfile_samples(shards)  # warm the page cache, and the count both must match

    def check(name, n):
        if n != n_tar:
            raise AssertionError(f"{name} read {n} samples, tarfile {n_tar}")

    _wds_samples(shards)  # warm-up: imports
    read = paired_trials(lambda: check("tarfile", _tarfile_samples(shards)),
                         lambda: check("webdataset", _wds_samples(shards)), pairs, clock="cpu")
    loaders = {w: _decoding_loader(shards, w) for w in (1, 2)}

    def passes(w):
        def run():
            for _ in range(epochs):
                check(f"{w} workers", sum(len(batch[1]) for batch in loaders[w]))
        return run

    try:
        for w in (1, 2):
            passes(w)()  # start the workers, import, decode once: not in the figure
        before = available_parallelism(2)
        workers = paired_trials(passes(1), passes(2), worker_pairs)
        after = available_parallelism(2)
    finally:
        loaders.clear()  # the last references: their persistent workers stop
    result = {"scale": scale, "samples": n_tar, "shards": len(shards), "pairs": pairs,
              "worker_pairs": worker_pairs, "epochs_per_trial": epochs,
              "tarfile_samples_per_s": n_tar / min(t for t, _ in read),
              "wds_samples_per_s": n_tar / min(w for _, w in read),
              "decode_1_worker_samples_per_s": epochs * n_tar / min(a for a, _ in workers),
              "decode_2_workers_samples_per_s": epochs * n_tar / min(b for _, b in workers),
              "cores": usable_cores(), "cpu_count": os.cpu_count()}
    result |= judge("read_ratio_vs_tarfile", [t / w for t, w in read], READ_GOAL)
    result |= judge("workers_2_vs_1", [a / b for a, b in workers], WORKERS_GOAL)
    return result | busy_verdict("workers_2_vs_1", result, before, after, WORKERS_GOAL)
