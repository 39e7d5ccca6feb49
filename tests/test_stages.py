"""labkit.images.stages: the per-stage cost breakdown of an image pipeline (chapter 10)."""

from __future__ import annotations

import labkit as lk
from labkit.images.stages import STAGES


def test_breakdown_times_every_stage(ci_fixture):
    ds = lk.ImageFolderDataset(ci_fixture("images"))
    b = lk.images.stage_breakdown(ds, lk.images.make_augment("torch", 32), samples=32, batch_size=8,
                           repeats=1, device="cuda")
    assert set(b.per_sample_s) == set(STAGES)
    for stage in ("read", "decode", "augment", "collate"):
        assert b.per_sample_s[stage] > 0
    assert b.bottleneck in ("read", "decode", "augment", "collate")
    if b.per_sample_s["host_to_device"] is None:  # no CUDA: skipped, with the reason
        assert b.notes["host_to_device"]
        assert "skipped" in b.table()
    assert "bottleneck" in b.table()


def test_breakdown_batch_augment_and_none(ci_fixture):
    ds = lk.ImageFolderDataset(ci_fixture("images"))
    for aug in (None, lk.images.make_augment("kornia", 32)):
        b = lk.images.stage_breakdown(ds, aug, samples=16, batch_size=8, repeats=1)
        assert b.samples == 16 and b.total_s > 0
        assert b.notes["host_to_device"] == "no device given"
