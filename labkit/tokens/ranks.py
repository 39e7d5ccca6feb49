"""Chapter 11's torchrun job: lk.TokenBatches on real ranks, stopped and resumed (chapter 11).

Run by ``lk.torchrun("tokens", module="labkit.tokens.ranks", ...)``, not imported by a chapter.
Every rank joins a gloo group and reads its slice of each global batch with
:class:`~labkit.tokens.epoch.TokenBatches` (rank and world size from the variables torchrun
sets); a state passed in the config is loaded first. Each step ends in an ``all_reduce``, the
gradient sync of a training step. ``rank{r}.json`` holds the samples of every step and the
state the rank saved after its last.
"""

from __future__ import annotations

import datetime
import itertools
import json
import sys
import traceback
from pathlib import Path

from ..data.fixtures import fixture
from .corpus import open_tokens
from .epoch import TokenBatches


def main() -> None:
    import torch
    import torch.distributed as dist

    cfg = json.loads(Path(sys.argv[1]).read_text())
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    rank, world = dist.get_rank(), dist.get_world_size()
    out: dict = {"rank": rank, "world_size": world}
    try:
        if cfg["job"] != "tokens":
            raise ValueError(f"unknown job {cfg['job']!r}")
        corpus = open_tokens(fixture("corpus", cfg["scale"], progress=False))
        tb = TokenBatches(corpus, cfg["context"], cfg["global_batch"] // world, seed=cfg["seed"],
                          num_workers=cfg["num_workers"])   # rank, world size: torchrun's
        if cfg.get("state"):
            tb.load_state_dict(cfg["state"])
        out["samples"] = []
        for batch in itertools.islice(tb, cfg.get("steps")):
            dist.all_reduce(torch.ones(16))                   # the step's gradient sync
            out["samples"].append(batch["sample"].tolist())
        out["state"] = tb.state_dict()
    except BaseException:
        out["traceback"] = traceback.format_exc()[-2000:]    # for the launcher's report
        raise
    finally:
        (Path(cfg["out"]) / f"rank{rank}.json").write_text(json.dumps(out))
        dist.destroy_process_group()
