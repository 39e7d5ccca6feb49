"""Chapter 11's torchrun job: lk.tokens.TokenBatches on real ranks, stopped and resumed (ch. 11c).

Run by ``lk.remote.torchrun("tokens", module="labkit.tokens.ranks", ...)``, not imported by a
chapter.
Every rank joins a gloo group and reads its slice of each global batch with
:class:`~labkit.tokens.epoch.TokenBatches` (rank and world size from the variables torchrun
sets); a state passed in the config is loaded first. Each step ends in an ``all_reduce``, the
gradient sync of a training step. ``rank{r}.json`` holds the samples of every step and the
state the rank saved after its last.
"""

from __future__ import annotations

import itertools
from contextlib import closing

from ..data.fixtures import fixture
from ..remote.launch import run_rank
from .corpus import open_tokens
from .epoch import TokenBatches


def _job(cfg: dict, dist, out: dict) -> None:
    import torch

    if cfg["job"] != "tokens":
        raise ValueError(f"unknown job {cfg['job']!r}")
    corpus = open_tokens(fixture("corpus", cfg["scale"], progress=False))
    tb = TokenBatches(corpus, cfg["context"], cfg["global_batch"] // out["world_size"],
                      seed=cfg["seed"], num_workers=cfg["num_workers"])  # rank: torchrun's
    if cfg.get("state"):
        tb.load_state_dict(cfg["state"])
    # every rank takes the same number of steps: the epoch's last global batch may leave a
    # rank nothing, and a rank that stopped early would end its peers' all_reduce
    steps = -(-(tb.index.samples - tb.samples_yielded) // cfg["global_batch"])
    steps = min(steps, cfg.get("steps") or steps)
    out["samples"] = []
    with closing(iter(tb)) as batches:                    # a stop mid-epoch ends the workers here
        for batch in itertools.islice(batches, steps):
            dist.all_reduce(torch.ones(16))               # the step's gradient sync
            out["samples"].append(batch["sample"].tolist())
    out["state"] = tb.state_dict()
    for _ in range(steps - len(out["samples"])):          # nothing left here: still in sync
        dist.all_reduce(torch.zeros(16))


def main() -> None:
    run_rank(_job)
