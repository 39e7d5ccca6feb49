"""labkit.instruments.meter and labkit.loading.batch: the throughput meter counts exactly
(chapter 01).

Behaviour only: exact sample and batch counts in every mode, errors, the wait/compute split
by ordering, the latency bookkeeping with a fake clock. No assertion on speed.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset, TensorDataset

from labkit.instruments import meter
from labkit.instruments.measurement import Measurement, Pass, compare, rate, wait_fraction
from labkit.instruments.meter import measure, simulated_step, uniform_batch_size
from labkit.loading.batch import batch_nbytes, batch_tensors, make_sizer

BATCH = 4
BATCH_COUNTS = [1, 2, 63, 64, 65, 1000]


def _stock_loader(batches: int, partial: int = 3) -> tuple[DataLoader, int]:
    """A stock DataLoader of ``batches`` batches of 4 int64 ids, the last holding ``partial``."""
    n = BATCH * (batches - 1) + partial
    return DataLoader(TensorDataset(torch.arange(n)), batch_size=BATCH), n


def _noop(batch):
    pass


MODES = {
    "auto": {},
    "exact": {"batch_size": None},
    "declared": {"batch_size": BATCH},
    "step": {"step": _noop},
    "step-exact": {"step": _noop, "batch_size": None},
}


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("batches", BATCH_COUNTS)
def test_exact_counts_on_a_stock_loader(batches, mode):
    loader, n = _stock_loader(batches)
    m = measure(loader, repeats=2, warmup=1, **MODES[mode])
    assert len(m.passes) == 2
    for p in m.passes:
        assert (p.batches, p.samples, p.nbytes) == (batches, n, 8 * n)
        assert p.steady_samples == n - (min(BATCH, n))
        assert len(p.wait) <= batches - 1 and np.all(p.wait >= 0)
        if "step" in MODES[mode]:
            assert len(p.wait) == batches - 1 and len(p.compute) == batches
    assert m.samples == n and m.batches == batches


@pytest.mark.parametrize("batches", [1, 2, 64, 65, 1000])
def test_full_last_batch_and_max_batches(batches):
    loader, n = _stock_loader(batches, partial=BATCH)
    assert measure(loader, repeats=1, warmup=0).samples == n
    assert measure(loader, repeats=1, warmup=0, batch_size=None).samples == n
    cut = measure(loader, repeats=1, warmup=0, max_batches=min(batches, 10))
    assert cut.passes[0].batches == min(batches, 10) and cut.samples == 4 * min(batches, 10)


def _odd_sizes(batches: int):
    """A generator of int tensors holding 3, 5, 7, ... samples."""
    for b in range(batches):
        yield torch.arange(3 + 2 * b)


@pytest.mark.parametrize("batch_size", [None, "auto"])
@pytest.mark.parametrize("batches", BATCH_COUNTS)
def test_varying_batch_sizes_are_counted_exactly(batches, batch_size):
    expected = sum(3 + 2 * b for b in range(batches))
    m = measure(lambda: _odd_sizes(batches), repeats=2, warmup=1, batch_size=batch_size)
    assert [p.samples for p in m.passes] == [expected, expected]
    assert [p.batches for p in m.passes] == [batches, batches]
    with_step = measure(lambda: _odd_sizes(batches), step=_noop, repeats=1, warmup=0,
                        batch_size=batch_size)
    assert with_step.samples == expected


def test_generator_function_is_a_factory():
    def gen():
        yield from _odd_sizes(5)

    assert measure(gen, repeats=2, warmup=0).samples == 3 + 5 + 7 + 9 + 11


def test_bare_iterator_needs_a_factory():
    with pytest.raises(TypeError, match=r"lambda: gen\(\)"):
        measure(_odd_sizes(3))
    with pytest.raises(TypeError, match="more than once"):
        measure(iter([torch.zeros(2)] * 3), repeats=2, warmup=0)
    # one pass is fine
    assert measure(_odd_sizes(3), repeats=1, warmup=0).samples == 3 + 5 + 7


def test_empty_loader_raises():
    with pytest.raises(ValueError, match="no batch"):
        measure([])
    with pytest.raises(ValueError, match="no batch"):
        measure(DataLoader(TensorDataset(torch.arange(0)), batch_size=4))
    with pytest.raises(ValueError, match="no batch"):
        measure(lambda: iter(()), step=_noop)
    with pytest.raises(ValueError, match="repeats"):
        measure([torch.zeros(1)], repeats=0)


def test_declared_batch_size_smaller_than_first_batch_raises():
    loader, _ = _stock_loader(10)
    with pytest.raises(ValueError, match=r"batch_size=2 was declared.*holds 4 samples"):
        measure(loader, batch_size=2)


def _slow_loader(batches=25, ms=2.0):
    for _ in range(batches):
        time.sleep(ms / 1e3)
        yield torch.zeros(4)


def test_wait_fraction_high_when_the_loader_is_slow():
    m = measure(lambda: _slow_loader(), step=simulated_step(0.0), repeats=3, warmup=0)
    assert m.wait_fraction > 0.5 and m.wait_s > m.compute_s
    assert 0 <= m.wait_fraction <= 1.0 + 1e-9


def test_wait_fraction_low_when_the_step_is_slow():
    fast = [torch.zeros(4)] * 25
    m = measure(fast, step=simulated_step(2.0), repeats=3, warmup=0)
    assert m.wait_fraction < 0.5 and m.compute_s > m.wait_s
    assert m.compute_s >= 25 * 2e-3  # each of 25 steps slept >= 2 ms (a lower bound)


@pytest.mark.parametrize("kind", ["sleep", "busy"])
def test_simulated_step_kinds(kind):
    step = simulated_step(1.5, kind)
    assert step.label == f"{kind} 1.5 ms"
    t0 = time.perf_counter()
    step(None)
    assert time.perf_counter() - t0 >= 1.5e-3  # never shorter than asked
    m = measure([torch.zeros(2)] * 3, step=step, repeats=1, warmup=0)
    assert m.step == step.label


def test_busy_step_counts_its_own_cpu_time_not_the_wall_clock():
    """Review 09-1: a busy step that shares the GIL with a busy thread takes longer in wall
    time (the other thread's work is not free), where a wall-clock spin would end on time."""
    import threading

    def spin(seconds):
        deadline = time.thread_time() + seconds
        while time.thread_time() < deadline:
            pass

    other = threading.Thread(target=spin, args=(0.5,), daemon=True)
    other.start()
    time.sleep(0.01)  # the other thread is spinning, holding the GIL in turns
    t0 = time.perf_counter()
    simulated_step(60.0, "busy")(None)
    elapsed = time.perf_counter() - t0
    other.join()
    assert elapsed >= 1.3 * 60e-3, f"the busy step ended after {elapsed * 1e3:.0f} ms"


def test_simulated_step_rejects_unknown_kind():
    with pytest.raises(ValueError, match="'gpu'"):
        simulated_step(1.0, "gpu")


def test_step_name_of_a_plain_function():
    def train_step(batch):
        pass

    assert measure([torch.zeros(2)], step=train_step, repeats=1, warmup=0).step == "train_step"


def test_as_observations_shape_and_units():
    data = [torch.zeros(4, 8)] * 10
    plain = measure(data, repeats=2, warmup=0, name="toy", config={"num_workers": 0})
    obs = plain.as_observations()
    assert [o["name"] for o in obs] == ["toy.samples_per_s", "toy.bytes_per_s",
                                        "toy.first_batch_s"]
    assert [o["unit"] for o in obs] == ["samples/s", "B/s", "s"]
    assert all(set(o) == {"name", "value", "unit", "config", "note"} for o in obs)
    assert all(isinstance(o["value"], float) and o["value"] >= 0 for o in obs)
    assert obs[0]["config"] == {"num_workers": 0} and "2 passes" in obs[0]["note"]
    stepped = measure(data, step=simulated_step(0.1), repeats=1, warmup=0, name="toy")
    obs = stepped.as_observations(name="ch01", config={"batch_size": 4})
    assert [o["name"] for o in obs][-1] == "ch01.wait_fraction"
    assert obs[-1]["unit"] == "fraction" and 0 <= obs[-1]["value"] <= 1
    assert obs[0]["config"] == {"batch_size": 4, "step": "sleep 0.1 ms"}
    # bytes/s is samples/s times bytes per sample (8 float32 = 32 B)
    assert stepped.bytes_per_s == pytest.approx(stepped.samples_per_s * 32)


def test_str():
    m = measure([torch.zeros(4)] * 5, repeats=3, warmup=0, name="five")
    assert len(m.passes) == 3 and m.samples == 20 and m.batches == 5
    lo, hi = m.samples_per_s_range
    assert lo <= m.samples_per_s <= hi
    assert str(m).startswith("five: ") and "3 passes" in str(m)


def _fixed(name: str, samples_per_s: float) -> Measurement:
    p = Pass(batches=11, samples=110, nbytes=880, first_batch_s=0.001, epoch_s=1.0,
             steady_s=100 / samples_per_s, steady_samples=100, wait=np.zeros(10),
             compute=np.empty(0))
    return Measurement(name=name, passes=[p])


def test_compare_table():
    ms = [_fixed("baseline", 1000.0), _fixed("two-workers", 2000.0), _fixed("slow", 500.0)]
    lines = compare(ms).splitlines()
    assert "x base" in lines[0] and len(lines) == 4
    rows = {line.split()[0]: line for line in lines[1:]}
    assert rows["baseline"].endswith("1.00") and rows["two-workers"].endswith("2.00")
    assert rows["slow"].endswith("0.50")
    rows = {line.split()[0]: line for line in compare(ms, baseline=1).splitlines()[1:]}
    assert rows["two-workers"].endswith("1.00") and rows["baseline"].endswith("0.50")


def test_compare_real_measurements_has_each_name():
    a = measure([torch.zeros(4)] * 20, repeats=1, warmup=0, name="list")
    b = measure(lambda: _odd_sizes(20), repeats=1, warmup=0, name="gen")
    table = compare([a, b])
    assert "list" in table and "gen" in table
    assert table.splitlines()[1].endswith("1.00")


# -- grouped timing -------------------------------------------------------------------------


@pytest.mark.parametrize("batch_size", ["auto", None, 2])
def test_grouped_timing_counts_exactly(batch_size):
    batches = [torch.zeros(2)] * 4999 + [torch.zeros(1)]  # 5000 instant batches
    m = measure(batches, repeats=2, warmup=0, batch_size=batch_size)
    for p in m.passes:
        assert (p.batches, p.samples) == (5000, 9999)


@pytest.mark.parametrize("batch_size", ["auto", None, 2])
def test_forced_grouping_counts_exactly(monkeypatch, batch_size):
    monkeypatch.setattr(meter, "FAST_BATCH_S", 1e3)  # every loader counts as fast
    monkeypatch.setattr(meter, "GROUP_PERIOD_S", 1e9)  # groups as large as allowed
    S = meter.MAX_STRIDE
    batches = [torch.zeros(2)] * 4999 + [torch.zeros(1)]
    p = measure(batches, repeats=1, warmup=0, batch_size=batch_size).passes[0]
    assert p.stride == S and (p.batches, p.samples) == (5000, 9999)
    odd = measure(lambda: _odd_sizes(1000), repeats=1, warmup=0, batch_size=None).passes[0]
    assert odd.stride == S and odd.samples == sum(3 + 2 * b for b in range(1000))


class _FakeClock:
    """A clock only the loader and the step move: latency becomes exact."""

    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def _clocked(clock, batches, dt):
    for i in range(batches):
        clock.t += dt(i)
        yield torch.zeros(2)


@pytest.mark.parametrize("batches", [5, 64, 65, 128, 1000])
def test_latency_is_exact_with_a_fake_clock(monkeypatch, batches):
    clock = _FakeClock()
    monkeypatch.setattr(meter.time, "perf_counter", clock)
    p = measure(lambda: _clocked(clock, batches, lambda i: 1.0), repeats=1, warmup=0).passes[0]
    assert p.stride == 1 and p.first_batch_s == 1.0
    np.testing.assert_array_equal(p.wait, np.ones(batches - 1))
    assert p.samples_per_s == 2.0 and p.steady_s == batches - 1

    def step(batch):
        clock.t += 0.5

    m = measure(lambda: _clocked(clock, batches, lambda i: 1.0), step=step, repeats=1,
                warmup=0)
    np.testing.assert_array_equal(m.passes[0].wait, np.ones(batches - 1))
    np.testing.assert_array_equal(m.passes[0].compute, np.full(batches, 0.5))
    if batches > 1:
        assert m.wait_fraction == pytest.approx(1 / 1.5)


@pytest.fixture
def grouped_clock(monkeypatch):
    """A fake clock the meter reads, and grouping forced to its largest stride."""
    clock = _FakeClock()
    monkeypatch.setattr(meter.time, "perf_counter", clock)
    monkeypatch.setattr(meter, "FAST_BATCH_S", 1e3)  # every loader counts as fast
    monkeypatch.setattr(meter, "GROUP_PERIOD_S", 1e9)  # groups as large as allowed
    return clock, meter.MAX_STRIDE


@pytest.mark.parametrize("batches", [5000, 64 + 2 * meter.MAX_STRIDE])  # partial last group; none
def test_grouped_latency_mean_per_batch_full_groups(grouped_clock, batches):
    clock, S = grouped_clock
    p = measure(lambda: _clocked(clock, batches, lambda i: 1.0), repeats=1, warmup=0).passes[0]
    assert p.stride == S and p.batches == batches
    full_groups = (batches - 64) // S
    # the 63 probe batches and every full group: exactly 1.0 s a batch
    np.testing.assert_array_equal(p.wait[: 63 + full_groups], np.ones(63 + full_groups))
    assert p.samples_per_s == 2.0


def test_grouped_latency_partial_last_group(grouped_clock):
    clock, S = grouped_clock
    # 5000 batches: 64 stamped singly, then full groups and a partial last group
    p = measure(lambda: _clocked(clock, 5000, lambda i: 1.0), repeats=1, warmup=0).passes[0]
    assert (5000 - 64) % S  # the case under test: a partial last group
    assert p.wait.max() == 1.0 and p.wait.min() == 1.0


def test_grouped_latency_percentiles_weight_batches(grouped_clock):
    clock, S = grouped_clock
    # 2000 batches: the first 64 arrive 1 ms apart, the other 1936 (97 %) 2 ms apart
    # (before the fix, 63 probe entries outweighed the few group entries)
    m = measure(lambda: _clocked(clock, 2000, lambda i: 1e-3 if i < 64 else 2e-3),
                repeats=1, warmup=0)
    assert m.passes[0].stride == S
    assert m.latency_ms(50) == pytest.approx(2.0)


# -- uniform_batch_size ---------------------------------------------------------------------


class _Stream(IterableDataset):
    def __iter__(self):
        return iter(range(10))


def test_uniform_batch_size():
    ds = TensorDataset(torch.arange(10))
    assert uniform_batch_size(DataLoader(ds, batch_size=3)) == 3
    assert uniform_batch_size(DataLoader(ds, batch_size=3, shuffle=True, drop_last=True)) == 3
    assert uniform_batch_size(DataLoader(_Stream(), batch_size=3)) is None
    assert uniform_batch_size(DataLoader(ds, batch_size=3, collate_fn=list)) is None
    assert uniform_batch_size(DataLoader(ds, batch_size=None)) is None
    assert uniform_batch_size([torch.zeros(3)]) is None
    # an IterableDataset's batches are counted exactly: 10 = 3 + 3 + 3 + 1
    assert measure(DataLoader(_Stream(), batch_size=3), repeats=1, warmup=0).samples == 10


def test_measure_with_workers_leaves_none_behind(live_workers):
    loader = DataLoader(TensorDataset(torch.arange(200)), batch_size=8, num_workers=2,
                         timeout=30)
    assert loader.timeout == 30
    m = measure(loader, repeats=2, warmup=1)
    assert [p.samples for p in m.passes] == [200, 200]
    assert live_workers() == []
    m = measure(loader, repeats=1, warmup=0, max_batches=3)  # stopped mid-epoch
    assert m.samples == 24 and live_workers() == []


def test_measure_with_persistent_workers(live_workers):
    loader = DataLoader(TensorDataset(torch.arange(200)), batch_size=8, num_workers=2,
                         persistent_workers=True, timeout=10)
    try:
        m = measure(loader, repeats=2, warmup=1)
        assert [p.samples for p in m.passes] == [200, 200]
        workers = {p.pid for p in live_workers()}
        assert len(workers) == 2  # kept for the next epoch: that is what is measured
        m = measure(loader, repeats=2, warmup=0, max_batches=5)  # stopped mid-epoch
        assert [p.samples for p in m.passes] == [40, 40]
        assert {p.pid for p in live_workers()} == workers  # the same workers
        assert sum(len(b[0]) for b in loader) == 200  # and a full epoch after that
    finally:
        del loader  # the DataLoader owns its persistent workers: they stop with it
    assert live_workers() == []


# -- sizing batches -------------------------------------------------------------------------


@pytest.mark.parametrize("batch, n", [
    (torch.zeros(5, 3), 5),
    (np.zeros((7, 2)), 7),
    (torch.zeros(6), 6),
    ((torch.zeros(4, 3), torch.arange(4)), 4),
    ([torch.zeros(4, 3), torch.arange(4)], 4),  # default_collate of tuple samples
    ({"x": torch.zeros(3, 2), "y": torch.arange(3)}, 3),
    ({"x": {"a": np.zeros((2, 9))}}, 2),
    (((torch.zeros(5, 1), torch.zeros(5)), torch.zeros(5)), 5),
    ([b"abc", b"de", b"f"], 3),  # a list of raw samples
    (["a", "bb"], 2),
    ([1, 2, 3, 4], 4),
    (3, 1),
    (torch.tensor(2.0), 1),
])
def test_sizer_counts_samples(batch, n):
    assert make_sizer(batch)(batch) == n
    assert make_sizer(batch)(batch) == n


def test_sizer_is_specialised_to_the_first_batch():
    size = make_sizer({"x": torch.zeros(4, 2), "y": torch.zeros(4)})
    assert size({"x": torch.zeros(9, 2), "y": torch.zeros(9)}) == 9
    deep = make_sizer([[[torch.zeros(3)]]])
    assert deep([[[torch.zeros(11)]]]) == 11


@pytest.mark.parametrize("batch", [
    [(torch.zeros(256), i) for i in range(4)],
    [{"x": torch.zeros(256), "id": i} for i in range(4)],
])
def test_sizer_of_a_list_of_samples(batch):
    assert make_sizer(batch)(batch) == 4


def test_measure_a_loader_that_yields_lists_of_samples():
    ds = TensorDataset(torch.zeros(40, 256), torch.arange(40))
    loader = DataLoader(ds, batch_size=4, collate_fn=list)
    assert measure(loader, repeats=1, warmup=0).samples == 40


@pytest.mark.parametrize("batch", [
    {"__key__": "0000001", "jpg": b"\xff\xd8" + b"x" * 100, "cls": b"3"},
    b"\xff\xd8 one encoded image",
])
def test_sizer_of_one_raw_sample(batch):
    assert make_sizer(batch)(batch) == 1


def test_batch_nbytes():
    assert batch_nbytes(torch.zeros(4, 8)) == 128
    assert batch_nbytes(np.zeros(5, np.uint8)) == 5
    assert batch_nbytes((torch.zeros(4, dtype=torch.float64), torch.arange(4))) == 64
    assert batch_nbytes({"a": b"abcd", "b": bytearray(3), "c": memoryview(b"xy")}) == 9
    assert batch_nbytes(["h\u00e9", ("x",)]) == 4  # utf-8 bytes of strings
    assert batch_nbytes([torch.zeros(2, dtype=torch.int16)] * 3) == 12
    assert batch_nbytes(None) == 0 and batch_nbytes(7) == 0


def test_batch_tensors_counts_what_a_worker_hands_over_one_by_one():
    assert batch_tensors(torch.zeros(4, 8)) == 1
    assert batch_tensors((torch.zeros(4), torch.arange(4))) == 2
    assert batch_tensors({"x": torch.zeros(2), "meta": {"y": [torch.ones(1)] * 3}, "k": ["a"]}) == 4
    # numpy arrays, bytes and strings travel inside the pickle, not as tensors
    assert batch_tensors([np.zeros(3), b"ab", "s", 7, None]) == 0


def test_the_meter_counts_the_tensors_a_batch_holds():
    loader = DataLoader(TensorDataset(torch.zeros(16, 3), torch.arange(16)), batch_size=4)
    assert measure(loader, repeats=1).tensors_per_batch == 2  # images and labels
    assert measure(lambda: iter([{"x": torch.zeros(4), "k": ["a"] * 4}] * 3),
                   repeats=1).tensors_per_batch == 1


def test_one_rate_and_one_wait_fraction():
    """The meter and the dashboard share these two definitions (no 0.0 for an empty loop)."""
    assert rate(10, 2.0) == 5.0 and rate(10, 0.0) != rate(10, 0.0)  # NaN
    assert wait_fraction(1.0, 4.0) == 0.25 and wait_fraction(0.0, 0.0) != wait_fraction(0.0, 0.0)
    p = Pass(batches=3, samples=12, nbytes=0, first_batch_s=0.5, epoch_s=2.0, steady_s=1.0,
             steady_samples=8, wait=np.array([0.25, 0.25]), compute=np.array([]))
    m = Measurement("x", passes=[p])
    assert m.samples_per_s == 8.0 and m.epoch_samples_per_s == 6.0
    assert m.best_samples_per_s == 8.0 and m.wait_fraction == 0.5
