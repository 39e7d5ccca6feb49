"""The throughput dashboard, driven headlessly: widget values set, buttons clicked, no browser."""

from __future__ import annotations

import logging
import threading
import time

import psutil
import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from labkit.display.widget import Dashboard, DashboardModel
from labkit.errors import LabkitError
from labkit.instruments.measurement import Measurement

KNOBS = {"batch_size": [4, 8], "num_workers": [0, 2], "pin_memory": [False, True]}


class SlowTensors(Dataset):
    """A TensorDataset-like dataset, slow enough that a pass outlasts the test.

    At module level so that DataLoader workers can find it under spawn / forkserver too.
    """

    def __init__(self, n: int = 100_000, delay_s: float = 0.002):
        self.x = torch.arange(n, dtype=torch.float32)
        self.delay_s = delay_s

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int):
        time.sleep(self.delay_s)
        return self.x[i], i


def list_loader(cfg: dict, batches: int = 10) -> list:
    return [list(range(cfg["batch_size"])) for _ in range(batches)]


def slow_gen(batches: int, delay_s: float, closed: threading.Event | None = None):
    try:
        for i in range(batches):
            time.sleep(delay_s)
            yield [i, i]
    finally:
        if closed is not None:
            closed.set()


def torch_loader(cfg: dict) -> DataLoader:
    kwargs = {"prefetch_factor": 2, "persistent_workers": False} if cfg["num_workers"] else {}
    # timeout= so a broken worker fails the test instead of hanging it.
    return DataLoader(SlowTensors(), batch_size=cfg["batch_size"], num_workers=cfg["num_workers"],
                      pin_memory=cfg["pin_memory"], timeout=10 if cfg["num_workers"] else 0,
                      **kwargs)


def new_children(before: set[int], within_s: float = 5.0) -> list:
    """Child processes not in ``before``, polled briefly (a process takes a moment to exit)."""
    deadline = time.monotonic() + within_s
    while True:
        kids = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
        kids = [p for p in kids if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        if not kids or time.monotonic() > deadline:
            return kids
        time.sleep(0.05)


def test_sync_run_counts_every_sample_exactly():
    model = DashboardModel(list_loader, knobs={**KNOBS, "batch_size": [8, 4]})
    row = model.run()
    assert model.state == "done" and not model.running
    assert isinstance(row, Measurement) and row.passes[0].steady_samples == 72
    assert (row.batches, row.samples, row.status) == (10, 80, "done")
    assert row.run == 1 and row.config["batch_size"] == 8 and row.config["num_workers"] == 0
    assert row.first_batch_s >= 0 and row.passes[0].epoch_s > 0 and row.samples_per_s > 0
    assert "run 1:" in str(row) and str(row).endswith("[done]")
    assert model.series and set(model.series[0]) == {"t_s", "samples_per_s", "wait_fraction"}
    row2 = model.run({"batch_size": 4})
    assert (row2.run, row2.samples) == (2, 40) and model.run_config["batch_size"] == 4
    assert model.config["batch_size"] == 4 and len(model.runs) == len(model.history) == 2
    assert model.best() in model.runs


def test_max_batches_ends_the_run_as_done():
    model = DashboardModel(lambda cfg: iter(lambda: [1, 2, 3], None), knobs=KNOBS, max_batches=7)
    row = model.run()
    assert (row.status, row.batches, row.samples) == ("done", 7, 21)


def test_wait_fraction_low_when_step_is_slow_and_high_when_loader_is_slow():
    slow_step = DashboardModel(list_loader, step=lambda b: time.sleep(0.002), knobs=KNOBS,
                               window_s=0.01)
    slow_loader = DashboardModel(lambda cfg: slow_gen(20, 0.004), step=lambda b: None,
                                 knobs=KNOBS, window_s=0.01)
    assert slow_step.run().wait_fraction < 0.5
    assert slow_loader.run().wait_fraction > 0.5
    assert all(0.0 <= p["wait_fraction"] <= 1.0 for p in slow_loader.series)
    assert len(slow_loader.series) > 1


def test_windows_tile_the_run_even_when_callbacks_are_slow():
    model = DashboardModel(lambda cfg: slow_gen(40, 0.002), knobs=KNOBS, window_s=0.02)
    model.on_update(lambda m: time.sleep(0.03))  # slower than a window, like a plot render
    row = model.run()
    starts = [0.0] + [p["t_s"] for p in model.series[:-1]]
    spans = [p["t_s"] - s for p, s in zip(model.series, starts, strict=True)]
    assert len(spans) > 1 and all(span >= 0.02 for span in spans[:-1]) and spans[-1] > 0
    # Each window's rate times its span gives back a whole number of 2-sample batches.
    counts = [p["samples_per_s"] * span for p, span in zip(model.series, spans, strict=True)]
    assert all(abs(c / 2 - round(c / 2)) < 1e-6 and c >= 2 for c in counts)
    assert sum(counts) <= row.samples + 1e-6  # a short last window is not drawn
    assert model.series[-1]["t_s"] <= row.passes[0].epoch_s + 1e-9


def test_invalid_knob_value_names_the_knob_and_allowed_values():
    model = DashboardModel(list_loader)
    with pytest.raises(ValueError, match=r"num_workers.*\[0, 1, 2, 4\]"):
        model.set("num_workers", 3)
    with pytest.raises(ValueError, match="pin_memory"):
        model.set("pin_memory", 1)  # 1 == True in Python; a knob must not accept it
    with pytest.raises(ValueError, match="unknown knob 'workers'"):
        model.set("workers", 2)
    with pytest.raises(ValueError, match="batch_size"):
        model.run({"num_workers": 2, "batch_size": 5})
    assert model.config["num_workers"] == 0 and not model.runs  # nothing half-applied
    dash = Dashboard(list_loader, knobs=KNOBS)
    with pytest.raises(ValueError, match="batch_size"):
        dash.run_sync(batch_size=5)


def test_erroring_loader_and_step_end_in_error_state_with_the_message():
    def broken(cfg):
        yield [1, 2]
        raise RuntimeError("shard 3 is truncated")

    model = DashboardModel(broken, knobs=KNOBS)
    row = model.run()
    assert model.state == "error" and "shard 3 is truncated" in model.error
    assert row.status.startswith("error:") and "shard 3 is truncated" in row.status
    assert row.batches == 1 and model.best() is None

    dash = Dashboard(list_loader, step=lambda b: 1 / 0, knobs=KNOBS)
    dash.run_button.click()
    assert dash.model.wait(5)
    assert dash.model.state == "error" and "ZeroDivisionError" in dash.model.error
    assert "ZeroDivisionError" in dash.table.value and "error" in dash.status.value
    assert not dash.run_button.disabled and dash.stop_button.disabled


def test_raising_callbacks_are_logged_and_do_not_break_the_run(caplog):
    model = DashboardModel(list_loader, knobs=KNOBS, window_s=0.0)
    seen = []

    def bad(m):
        seen.append(m.state)
        raise RuntimeError("plot went wrong")

    model.on_update(bad)
    model.on_finish(bad)
    with caplog.at_level(logging.ERROR, logger="labkit.display.widget"):
        row = model.run()
    assert row.status == "done" and row.samples == 40
    assert seen[-1] == "done" and len(seen) > 2
    assert "plot went wrong" in caplog.text


def test_clicking_run_and_stop_on_a_generator_closes_it():
    closed = threading.Event()
    dash = Dashboard(lambda cfg: slow_gen(100_000, 0.001, closed), knobs=KNOBS)
    dash.run_button.click()
    assert dash.model.running and dash.run_button.disabled and not dash.stop_button.disabled
    with pytest.raises(LabkitError, match="in progress"):
        dash.model.start()
    time.sleep(0.1)
    dash.stop_button.click()
    assert dash.model.wait(5)
    assert dash.model.state == "stopped" and closed.is_set()
    assert dash.model.runs[-1].status == "stopped"


def test_stop_mid_run_shuts_down_torch_workers():
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    dash = Dashboard(torch_loader, knobs=KNOBS)
    dash.controls["num_workers"].value = 2
    dash.controls["batch_size"].value = 8
    assert dash.model.config["num_workers"] == 2
    dash.run_button.click()
    deadline = time.monotonic() + 10
    while not dash.model.series and time.monotonic() < deadline:  # a few batches in
        time.sleep(0.02)
    assert dash.model.state == "running"
    assert new_children(before, within_s=0), "the DataLoader should have started workers"
    t = time.monotonic()
    dash.stop_button.click()
    assert dash.model.wait(5) and time.monotonic() - t < 5
    assert dash.model.state == "stopped"
    row = dash.model.runs[-1]
    assert row.status == "stopped" and 0 < row.samples < len(SlowTensors())
    assert row.samples == 8 * row.batches
    # the model drops its last references to the loader and its iterator: torch stops the
    # workers (a factory that kept them, as a notebook's history might, would keep them)
    assert new_children(before) == []


def test_a_dashboard_run_counts_a_batchs_tensors_as_the_meter_does():
    def pairs(cfg):
        return DataLoader(torch.utils.data.TensorDataset(torch.zeros(16, 3), torch.arange(16)),
                          batch_size=cfg["batch_size"])

    row = Dashboard(pairs, knobs={"batch_size": [4]}).run_sync()
    assert row.tensors_per_batch == 2  # images and labels, as lk.measure counts them
    assert Dashboard(list_loader, knobs=KNOBS).run_sync(batch_size=4).tensors_per_batch == 0


def test_dashboard_run_sync_refreshes_plot_and_table():
    dash = Dashboard(list_loader, knobs=KNOBS, title="Chapter 01")
    assert type(dash.controls["pin_memory"]).__name__ == "Checkbox"
    assert dash.controls["batch_size"].options == (("4", 4), ("8", 8))
    assert bytes(dash.plot.value).startswith(b"\x89PNG")  # an empty plot before the first run
    dash.controls["pin_memory"].value = True
    row = dash.run_sync(batch_size=4)
    assert row.samples == 40 and row.config["pin_memory"] is True
    assert dash.controls["batch_size"].value == 4
    png = bytes(dash.plot.value)  # ipywidgets 8 hands back a memoryview
    assert png.startswith(b"\x89PNG") and len(png) > 1000
    assert "<table>" in dash.table.value and "<td>40</td>" in dash.table.value
    dash.run_sync(batch_size=8)
    assert dash.table.value.count("<tr") == 3  # header + two runs
    assert not dash.run_button.disabled and "run 2 done" in dash.status.value
    assert dash.widget.children and "application/vnd.jupyter.widget-view+json" in (
        dash._repr_mimebundle_()
    )


def test_epochs_repeat_the_loader_and_none_runs_until_max_seconds():
    model = DashboardModel(lambda cfg: list_loader(cfg, batches=4), epochs=3)
    row = model.run({"batch_size": 16})
    assert row.batches == 12 and row.samples == 12 * 16
    timed = DashboardModel(lambda cfg: list_loader(cfg, batches=4), epochs=None,
                           max_seconds=0.2, step=lambda b: time.sleep(0.001))
    row = timed.run()
    assert row.status == "done" and row.batches > 12  # kept passing until the clock ran out
    with pytest.raises(ValueError, match="max_seconds"):
        DashboardModel(list_loader, epochs=None)


def test_run_sync_raises_on_a_broken_loader_and_shows_the_run():
    def broken(cfg):
        raise OSError("disk gone")

    dash = Dashboard(broken)
    with pytest.raises(LabkitError, match="disk gone"):
        dash.run_sync()
    row = dash.model.runs[-1]
    assert row.status.startswith("error") and "disk gone" in row.status
    assert row.samples == 0 and "<td>0</td>" in dash.table.value and "nan" not in dash.table.value
