"""Stage breakdown of an image pipeline: which stage bounds it (chapter 10).

The checklist's bottleneck diagnosis, measured: time read, decode, augment, collate and
host-to-device separately, per sample, on the same samples, in one process. The slowest
stage per sample bounds what one core can deliver; ``num_workers`` multiplies every
stage but host-to-device and the training step, which stay in the main process.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch.utils.data import default_collate

from ..instruments.timer import best_of
from ..loading.batch import to_device
from ..optional import status

STAGES = ("read", "decode", "augment", "collate", "host_to_device")


@dataclass
class StageBreakdown:
    """Seconds per sample of each stage (``None``: skipped, see :attr:`notes`)."""

    samples: int
    per_sample_s: dict[str, float | None]
    notes: dict[str, str] = field(default_factory=dict)

    @property
    def bottleneck(self) -> str:
        """The stage with the largest cost per sample."""
        timed = {k: v for k, v in self.per_sample_s.items() if v is not None}
        return max(timed, key=timed.get)

    @property
    def total_s(self) -> float:
        return sum(v for v in self.per_sample_s.values() if v is not None)

    def samples_per_s(self, stage: str) -> float:
        """What this stage alone could sustain on one core (samples/s)."""
        v = self.per_sample_s[stage]
        return float("nan") if not v else 1.0 / v

    def table(self) -> str:
        lines = [f"{'stage':<16}{'us/sample':>11}{'share':>8}{'alone: samples/s':>18}"]
        for k, v in self.per_sample_s.items():
            if v is None:
                lines.append(f"{k:<16}{'skipped':>11}   ({self.notes.get(k, '')})")
                continue
            lines.append(f"{k:<16}{v * 1e6:>11,.1f}{v / self.total_s:>8.0%}"
                         f"{1 / v:>18,.0f}" + ("  <- bottleneck" if k == self.bottleneck
                                                 else ""))
        lines.append(f"{'one core, all':<16}{self.total_s * 1e6:>11,.1f}{'':>8}"
                     f"{1 / self.total_s:>18,.0f}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def stage_breakdown(dataset, augment=None, *, batch_size: int = 64, samples: int = 256,
                    device=None, repeats: int = 3) -> StageBreakdown:
    """Time each stage of ``dataset``'s pipeline per sample (best of ``repeats``).

    Args:
        dataset: an :class:`~labkit.ImageFolderDataset` (its ``read`` and ``decode``).
        augment: a per-sample augmentation (``lk.images.make_augment(..)`` with ``per="sample"``),
            a per-batch one (``per="batch"``, timed on the collated batch), or None (a CHW
            tensor conversion, what the dataset does without a transform).
        device: host-to-device target; without CUDA the stage is skipped, with the reason.
        repeats: timing passes; each stage keeps its fastest (noise only adds time).
    """
    n = min(samples, len(dataset))
    per_batch = getattr(augment, "per", "sample") == "batch"
    # Stage by stage over the same n samples, each the fastest of ``repeats`` passes after
    # the pass that produced its input (that pass is the warm-up).
    data = [dataset.read(i) for i in range(n)]
    images = [dataset.decode(i, data[i]) for i in range(n)]
    if augment is None or per_batch:
        def to_tensors():
            return [torch.from_numpy(img.transpose(2, 0, 1).copy()) for img in images]
    else:
        def to_tensors():
            return [augment(img) for img in images]
    out = to_tensors()

    def collate():
        return [default_collate(out[lo:lo + batch_size]) for lo in range(0, n, batch_size)]

    batches = collate()
    best = {
        "read": best_of(lambda: [dataset.read(i) for i in range(n)], repeats, 0).best_s,
        "decode": best_of(lambda: [dataset.decode(i, data[i]) for i in range(n)], repeats,
                          0).best_s,
        "augment": best_of(to_tensors, repeats, 0).best_s,
        "collate": best_of(collate, repeats, 0).best_s,
    }
    if per_batch:  # a per-batch augmentation runs on the collated batches (after collate)
        best["augment"] = best_of(lambda: [augment(b) for b in batches], repeats).best_s
    per = {k: v / n for k, v in best.items()}
    notes = {}
    ok, reason = status("cuda", device=device)
    if device is not None and ok:
        # pinned once, outside the timing: the stage is the copy, which a pinned-memory
        # DataLoader or the CUDA-stream prefetcher would feed from already pinned batches
        pinned = [to_device(b, "cpu", non_blocking=False) for b in batches]

        def copy():
            for b in pinned:
                to_device(b, device, non_blocking=True, pin=False)

        per["host_to_device"] = best_of(copy, repeats, sync=str(device)).best_s / n
        notes["host_to_device"] = f"pinned, non_blocking, to {device}"
    else:
        per["host_to_device"] = None
        notes["host_to_device"] = reason if device is not None else "no device given"
    if augment is None:
        notes["augment"] = "no augmentation: HWC array to CHW tensor only"
    return StageBreakdown(samples=n, per_sample_s=per, notes=notes)
