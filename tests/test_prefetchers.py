"""What stays in labkit of chapter 09's prefetchers: ``to_device`` and ``lk.status("cuda")``.

The prefetchers themselves are typed in chapter 09 (a thread and a queue by hand; torchdata's
``nodes.Prefetcher`` the robust one) and 09b (``cuda_stream_prefetch``); their checked cells
pin them.
"""

from __future__ import annotations

import pytest
import torch

import labkit as lk
from labkit.loading.batch import to_device


def test_to_device_cpu_keeps_structure():
    batch = {"x": torch.ones(2), "ids": [torch.arange(2), 3]}
    out = to_device(batch, "cpu", pin=False)
    assert set(out) == {"x", "ids"} and out["ids"][1] == 3


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only message")
def test_cuda_status_says_plainly_why_not():
    ok, reason = lk.status("cuda")
    assert not ok and ("CPU-only" in reason or "no CUDA device" in reason)
    assert lk.status("cuda", device="cpu") == (False, "device cpu is not a CUDA device") or not ok
