"""labkit.images.gpu: guarded GPU decode paths say why they cannot run; run them where they can."""

from __future__ import annotations

import pytest
import torch

import labkit as lk


def test_status_is_a_reason_not_an_exception():
    for probe in (lk.gpu_decode_status, lk.kornia_gpu_status, lk.dali_status):
        ok, reason = probe()
        assert isinstance(ok, bool) and isinstance(reason, str) and reason


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only behaviour")
def test_gpu_paths_refuse_with_the_reason(ci_fixture):
    blobs = lk.file_bytes(ci_fixture("images").file_list(".jpg")[:2])
    with pytest.raises(lk.LabkitError, match="GPU JPEG decode cannot run here"):
        lk.nvjpeg_decode(blobs)
    with pytest.raises(lk.LabkitError, match="DALI decode cannot run here"):
        lk.dali_decode_rate([])


@pytest.mark.gpu(probe=lk.gpu_decode_status)  # skipped, with the reason, where it cannot run
def test_nvjpeg_matches_cpu_decode(ci_fixture):
    files = ci_fixture("images").file_list(".jpg")[:16]
    blobs = lk.file_bytes(files)
    out = lk.nvjpeg_decode(blobs)
    assert len(out) == 16
    for b, x in zip(blobs, out, strict=True):
        ref = torch.from_numpy(lk.decode_jpeg(b).transpose(2, 0, 1).copy())
        assert x.shape == ref.shape and x.device.type == "cuda"
        # Not pixel-exact: besides IDCT rounding, libjpeg-turbo's "fancy" chroma upsampling
        # and nvJPEG's differ at colour edges (an H200 showed a max of 23 levels where the
        # bound here used to be 3). The image as a whole must agree: a small mean difference.
        diff = (x.cpu().int() - ref.int()).abs().float()
        assert diff.mean() <= 2.0, f"mean {diff.mean():.2f}, max {diff.max():.0f} levels"
    r = lk.gpu_decode_rate(blobs, batch_size=8, repeats=1)
    assert r["samples_per_s"] > 0


@pytest.mark.gpu(probe=lk.dali_status)  # skipped, with the reason, where it cannot run
def test_dali_decode(ci_fixture):
    r = lk.dali_decode_rate(ci_fixture("images").file_list(".jpg")[:64], batch_size=16,
                            repeats=1)
    assert r["samples_per_s"] > 0
