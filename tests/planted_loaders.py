"""Loaders with a planted bottleneck, for ``labkit diagnose`` (tests/test_diagnose.py).

In a module of their own so ``labkit diagnose tests/planted_loaders.py:FACTORY`` can import
them, and spawn workers too. Each bottleneck is ~4-10x the rest of the loop, so a loaded
machine cannot hide it. Costs are CPU time (``time.thread_time``) where the work is CPU
work, so a worker waiting for a core does not get its sample for free.
"""

from __future__ import annotations

import time

import torch
from torch.utils.data import DataLoader, Dataset


class SlowRead(Dataset):
    """Each sample waits 2 ms on "storage" (a sleep: no CPU)."""

    def __len__(self):
        return 400

    def read_record(self, i):
        time.sleep(0.002)
        return torch.full((16,), float(i))

    def __getitem__(self, i):
        return self.read_record(i)


class HeavyDecode(Dataset):
    """Each sample costs 2 ms of CPU to decode."""

    def __len__(self):
        return 400

    def decode_sample(self, i):
        deadline = time.thread_time() + 0.002  # inline: the hotspot is this function
        while time.thread_time() < deadline:
            pass
        return torch.full((16,), float(i))

    def __getitem__(self, i):
        return self.decode_sample(i)


class Cheap(Dataset):
    def __len__(self):
        return 4000

    def __getitem__(self, i):
        return torch.full((16,), float(i))


def pad_and_stack(samples):
    """A collate that costs 15 ms of CPU per batch (padding, tokenising, ...)."""
    deadline = time.thread_time() + 0.015
    while time.thread_time() < deadline:
        pass
    return torch.stack(samples)


def slow_read(num_workers: int = 0, prefetch_factor=None, persistent_workers: bool = False):
    """Takes the knobs, as a learner's factory might."""
    kw = {} if num_workers == 0 else {"prefetch_factor": prefetch_factor,
                                      "persistent_workers": persistent_workers, "timeout": 60}
    return DataLoader(SlowRead(), batch_size=8, num_workers=num_workers, **kw)


def heavy_decode():
    return DataLoader(HeavyDecode(), batch_size=8)


def heavy_collate():
    return DataLoader(Cheap(), batch_size=8, collate_fn=pad_and_stack)


def fast():
    return DataLoader(Cheap(), batch_size=8)


def plain_batches():
    """Not a DataLoader: a generator of batches (diagnose calls the factory again)."""
    return (torch.full((8, 16), float(b)) for b in range(50) if not time.sleep(0.004))


def raises():
    raise FileNotFoundError("/data/train.bin")


def empty():
    return DataLoader(Cheap(), batch_size=8, sampler=[])


class Hangs(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        time.sleep(3600)


def hangs_in_worker():
    """A worker that never returns, and no timeout= to save it."""
    return DataLoader(Hangs(), batch_size=8, num_workers=1)


def hangs_on_call():
    time.sleep(3600)


def fast_with_workers():
    """Samples that cost nothing, behind two workers: the hand-over is all the cost."""
    return DataLoader(Cheap(), batch_size=8, num_workers=2, timeout=60)
