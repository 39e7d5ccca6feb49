"""What stays in labkit of chapter 09's prefetchers: ``lk.status("cuda")``.

The prefetchers themselves are typed in chapter 09 (a thread and a queue by hand; torchdata's
``nodes.Prefetcher`` the robust one) and 09b (``cuda_stream_prefetch``); their checked cells
pin them.
"""

from __future__ import annotations

import pytest
import torch

import labkit as lk


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only message")
def test_cuda_status_says_plainly_why_not():
    ok, reason = lk.status("cuda")
    assert not ok and ("CPU-only" in reason or "no CUDA device" in reason)
    assert lk.status("cuda", device="cpu") == (False, "device cpu is not a CUDA device") or not ok
