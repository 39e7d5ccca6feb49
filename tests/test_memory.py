"""Per-worker memory sampling, ``lk.instruments.worker_memory`` (chapters 03b, 05b).

The copy-on-read datasets it was first shown on are typed in further/03b (``holders.py``).
"""

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from labkit.instruments.memory import worker_memory


class _Rows(Dataset):
    """Rows of one in-memory numpy array, as the chapter's NumpyRows."""

    def __init__(self, n: int):
        self.array = np.arange(n * 16, dtype=np.float32).reshape(n, 16)

    def __len__(self):
        return len(self.array)

    def __getitem__(self, i):
        return torch.from_numpy(self.array[i].copy()), i


def test_worker_memory_samples_every_worker():
    trace = worker_memory(DataLoader(_Rows(2048), batch_size=64, num_workers=2,
                                     multiprocessing_context="fork", timeout=60),
                          every=4, name="np")
    assert set(trace.uss) == {"worker0", "worker1"}
    assert len(trace.batches) >= 2 and all(v > 0 for v in trace.pss["worker0"])
    assert set(trace.growth()) == {"worker0", "worker1"}
    assert "worker0: USS" in trace.summary()


def test_worker_memory_needs_workers():
    with pytest.raises(ValueError, match="num_workers >= 1"):
        worker_memory(DataLoader(_Rows(100), batch_size=50))
