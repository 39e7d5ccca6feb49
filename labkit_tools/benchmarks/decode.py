"""``labkit bench decode``: JPEG decode scaled over workers against one core (chapter 10)."""

from __future__ import annotations

from torch.utils.data import Subset

from labkit.data.fixtures import fixture
from labkit.images.folder import ImageFolderDataset
from labkit.scale import resolve_scale

from .ceiling import worker_scaling
from .registry import benchmark

GOAL = 0.85


@benchmark("decode", goal=f"N workers deliver >= {GOAL} x (single-core rate x min(N, cores)) "
                          "(median of paired ratios, 95% interval; ceiling 1.0, less the share "
                          "of the cores the main process spends receiving batches and what other "
                          "programs hold: measured as ratio_ceiling, inconclusive when below "
                          "the goal)")
def decode(scale: str | None = None, decoder: str = "pil", num_workers: int | None = None,
           batch_size: int = 256, samples: int = 4096, rounds: int = 7) -> dict:
    """JPEG read, decode and collate by :func:`.ceiling.worker_scaling`. Batches of 256: with
    64, each batch's ~1-3 ms hand-over is most of what is timed."""
    fx = fixture("images", resolve_scale(scale), progress=False)
    images = ImageFolderDataset(fx, decoder=decoder)
    ds = Subset(images, [i % len(images) for i in range(samples)])  # a pass long enough to time
    return {"scale": resolve_scale(scale), "decoder": decoder,
            "image_size": fx.meta.get("size"), "samples": samples,
            **worker_scaling(ds, GOAL, num_workers, batch_size, rounds, unit="samples")}
