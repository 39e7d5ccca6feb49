"""Per-worker memory sampling and the copy-on-read datasets (chapter 03)."""

import numpy as np
import pytest
from contracts import check_exactly_once, check_lazy_equals_eager
from torch.utils.data import DataLoader

from labkit.data.copyonread import ArrowRows, NumpyRows, PyObjectRows
from labkit.display.plots import plot_worker_memory
from labkit.instruments.memory import worker_memory

KINDS = [PyObjectRows, NumpyRows, ArrowRows]


@pytest.fixture(scope="module")
def array_fx(ci_fixture):
    return ci_fixture("array")


@pytest.mark.parametrize("cls", KINDS, ids=lambda c: c.__name__)
def test_contracts(array_fx, cls):
    ds = cls(array_fx, rows=1000)
    ref = np.load(array_fx.file("array.npy"))
    assert check_lazy_equals_eager(DataLoader(ds, batch_size=64), lambda i: ref[i]) == 1000

    def make(rank, ws, nw):
        from torch.utils.data.distributed import DistributedSampler

        sampler = DistributedSampler(ds, num_replicas=ws, rank=rank, shuffle=False)
        return DataLoader(ds, batch_size=50, num_workers=nw, sampler=sampler,
                          timeout=60 if nw else 0)

    check_exactly_once(make, 1000)


def test_worker_memory_samples_every_worker(array_fx):
    ds = NumpyRows(array_fx, rows=2048)
    trace = worker_memory(DataLoader(ds, batch_size=64, num_workers=2,
                                     multiprocessing_context="fork", timeout=60),
                          every=4, name="np")
    assert set(trace.uss) == {"worker0", "worker1"}
    assert len(trace.batches) >= 2 and all(v > 0 for v in trace.pss["worker0"])
    assert set(trace.growth()) == {"worker0", "worker1"}
    assert "worker0: USS" in trace.summary()
    assert plot_worker_memory([trace]).axes[0].get_title() == "np"


def test_worker_memory_needs_workers(array_fx):
    with pytest.raises(ValueError, match="num_workers >= 1"):
        worker_memory(DataLoader(NumpyRows(array_fx, rows=100), batch_size=50))
