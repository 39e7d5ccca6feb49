"""The jobs :func:`labkit.torchrun` runs on every rank (chapter 04). Not public API.

``sharding``: DistributedSampler with and without ``set_epoch``, ``ShardStream`` split over
rank x worker and over workers, uneven shards under ``drop`` and ``pad``. ``hang``: uneven
shards with no policy, ended by the short ``pg_timeout_s`` of a group of its own.
"""

from __future__ import annotations

import datetime
import time

from torch.utils.data import DataLoader

from labkit.data.datasets import MemmapRows
from labkit.data.fixtures import fixture
from labkit.instruments.audits import deliveries, ids_of
from labkit.loading.loaders import WORKER_TIMEOUT_S
from labkit.remote.launch import PATIENT_S, run_rank
from labkit.streams.arrays import ShardStream


def _sampler_epochs(ds, cfg, rank, world, set_epoch: bool) -> list[list[int]]:
    from torch.utils.data.distributed import DistributedSampler

    sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=True, seed=0)
    epochs = []
    for epoch in range(2):
        if set_epoch:
            sampler.set_epoch(epoch)
        # no workers here: this part is about the sampler's split and order
        loader = DataLoader(ds, batch_size=cfg["batch_size"], sampler=sampler)
        epochs.append([i for b in loader for i in ids_of(b)])
    return epochs


def _uneven_steps(stream, cfg, policy: str, dist, torch, hang_group=None) -> dict:
    """Train-like loop with one all_reduce per batch; ``policy`` evens the step counts (with
    ``"none"``, steps past the shortest rank's run on ``hang_group`` and time out)."""
    nw = cfg["num_workers"]
    # One loader for the count and the steps: persistent workers start once per policy, not
    # once per pass (under spawn and forkserver each start imports torch: seconds a worker)
    loader = DataLoader(stream, batch_size=cfg["batch_size"], num_workers=nw,
                        persistent_workers=nw > 0, timeout=WORKER_TIMEOUT_S if nw > 0 else 0)
    mine = sum(1 for _ in loader)  # this rank's batches in one epoch (a whole pass)
    counts = torch.tensor([mine, -mine])
    dist.all_reduce(counts, op=dist.ReduceOp.MAX)  # -> [max, -min]
    most, least = int(counts[0]), -int(counts[1])
    steps = {"drop": least, "pad": most, "none": mine}[policy]
    got: dict[str, list[int]] = {}
    done = 0
    t0 = last = time.perf_counter()
    error, wait_s = None, 0.0
    try:
        while done < steps:
            it = iter(loader)
            try:
                for batch in it:
                    if done == steps:
                        break
                    group = hang_group if done >= least else None  # None: the patient group
                    dist.all_reduce(torch.ones(16), group=group)  # the gradient sync
                    for src, i in zip(batch["source"], ids_of(batch), strict=True):
                        got.setdefault(src, []).append(i)
                    done += 1
                    last = time.perf_counter()
            finally:
                del it  # the pass ends; the persistent workers wait for the next one
            if policy != "pad":
                break  # only padding cycles back to the start of this rank's data
    except RuntimeError as e:
        error = str(e).splitlines()[0][-160:]
        wait_s = time.perf_counter() - last  # from the last step that completed
    del loader  # the last reference: torch stops the workers
    return {"policy": policy, "my_batches": mine, "min_batches": least, "max_batches": most,
            "steps": done, "deliveries": sorted(got.items()), "error": error,
            "wait_s": wait_s, "elapsed_s": time.perf_counter() - t0}


def _job(cfg: dict, dist, out: dict) -> None:
    import torch

    # The demo's short timeout on a group of its own, used only where a peer never comes (the
    # steps past the shortest rank's last); every other collective waits up to PATIENT_S.
    hang_group = dist.new_group(
        timeout=datetime.timedelta(seconds=float(cfg.get("pg_timeout_s", PATIENT_S))))
    rank, world = out["rank"], out["world_size"]
    shards_fx = fixture("array_shards", cfg["scale"], progress=False)
    uneven = cfg.get("uneven_shards", [0, 1, 2])
    if cfg["job"] == "sharding":
        rows = MemmapRows(fixture("array", cfg["scale"], progress=False))
        out["sampler_set_epoch"] = _sampler_epochs(rows, cfg, rank, world, True)
        out["sampler_no_set_epoch"] = _sampler_epochs(rows, cfg, rank, world, False)
        for split in ("rank_worker", "worker"):
            ds = ShardStream(shards_fx, split=split, tag=True)
            nw = cfg["num_workers"]
            out[split] = deliveries(DataLoader(ds, batch_size=cfg["batch_size"], num_workers=nw,
                                               timeout=WORKER_TIMEOUT_S if nw > 0 else 0))
        for policy in ("drop", "pad"):
            ds = ShardStream(shards_fx, shards=uneven, tag=True)
            out[f"uneven_{policy}"] = _uneven_steps(ds, cfg, policy, dist, torch)
    if cfg["job"] == "hang" or cfg.get("then_hang"):  # last: a timeout breaks the group
        ds = ShardStream(shards_fx, shards=uneven, tag=True)
        out["uneven_none"] = _uneven_steps(ds, cfg, "none", dist, torch, hang_group)
        t0 = time.perf_counter()
        out["barrier_error"] = None
        if out["uneven_none"]["error"] is None:  # finished its batches: waits for the peer
            try:
                dist.barrier(group=hang_group)  # the end-of-epoch sync it waits in
            except RuntimeError as e:
                out["barrier_error"] = str(e).splitlines()[0][-160:]
        out["barrier_s"] = time.perf_counter() - t0
    if cfg["job"] not in ("sharding", "hang"):
        raise ValueError(f"unknown job {cfg['job']!r}")


def main() -> None:
    run_rank(_job)
