"""The live throughput dashboard: pick knobs, press Run, watch samples/s (chapter 01 on).

``DashboardModel`` is the logic (tests, headless notebooks), ``Dashboard`` its widgets."""

from __future__ import annotations

import gc
import html
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ..errors import LabkitError
from ..instruments.measurement import Measurement, rate, wait_fraction
from ..instruments.meter import stamped_pass, step_name, timed_steps
from ..loading.batch import batch_nbytes, batch_tensors, make_sizer
from .figures import agg_figure, png_bytes

log = logging.getLogger(__name__)

DEFAULT_KNOBS: dict[str, list] = {"num_workers": [0, 1, 2, 4], "batch_size": [16, 64, 256],
                                  "prefetch_factor": [2, 4], "pin_memory": [False, True]}


@dataclass(repr=False)
class DashboardRun(Measurement):
    """A one-pass :class:`Measurement`, its ``run`` number and ``status`` (done, stopped, error)."""

    run: int = 0
    status: str = "done"

    def __str__(self) -> str:
        return f"{super().__str__()} [{self.status}]"

    __repr__ = __str__


class DashboardModel:
    """One pass over ``make_loader(config)`` per run, timed in windows of ``window_s``."""

    def __init__(self, make_loader: Callable[[dict], Iterable],
                 step: Callable[[Any], Any] | None = None, knobs: dict[str, list] | None = None,
                 max_batches: int | None = None, max_seconds: float | None = None,
                 window_s: float = 0.25, epochs: int | None = 1):
        if epochs is None and max_seconds is None and max_batches is None:
            raise ValueError("epochs=None runs until stopped: give max_seconds or max_batches")
        self.epochs, self.make_loader, self.step = epochs, make_loader, step
        self.knobs = {k: list(v) for k, v in (knobs or DEFAULT_KNOBS).items()}
        for name, options in self.knobs.items():
            if not options:
                raise ValueError(f"knob {name!r} has no allowed values")
        self.config = {name: options[0] for name, options in self.knobs.items()}
        self.run_config = dict(self.config)  # the knobs of the current (or last) run
        self.max_batches, self.max_seconds, self.window_s = max_batches, max_seconds, window_s
        self.state, self.error = "idle", None
        self.series: list[dict] = []
        self.history: list[list[dict]] = []  # series of every run, aligned with ``runs``
        self.runs: list[DashboardRun] = []
        self._update_fns, self._finish_fns = [], []  # see on_update, on_finish
        self._stop, self._done, self._lock = threading.Event(), threading.Event(), threading.Lock()
        self._done.set()

    def set(self, name: str, value: Any) -> None:
        """Set knob ``name`` to ``value``; raise ValueError unless it is an allowed value."""
        self._check(name, value)
        self.config[name] = value

    def _check(self, name: str, value: Any) -> None:
        if name not in self.knobs:
            raise ValueError(f"unknown knob {name!r}; the knobs are {sorted(self.knobs)}")
        # True == 1 in Python, so a bool must not pass for num_workers=1 (nor 1 for True).
        if not any(value == o and isinstance(value, bool) == isinstance(o, bool)
                   for o in self.knobs[name]):
            raise ValueError(f"knob {name!r} cannot be {value!r}; allowed: {self.knobs[name]}")

    def on_update(self, fn: Callable[[DashboardModel], Any]) -> None:
        """Call ``fn(model)`` after each new point in :attr:`series` (from the run's thread)."""
        self._update_fns.append(fn)

    def on_finish(self, fn: Callable[[DashboardModel], Any]) -> None:
        """Call ``fn(model)`` when a run ends, whatever way it ends."""
        self._finish_fns.append(fn)

    @property
    def running(self) -> bool:
        return self.state in ("running", "stopping")

    def start(self, config: dict | None = None) -> None:
        """Start one pass in a background thread; returns at once (see :meth:`wait`)."""
        n = self._begin(config)
        # A daemon thread, so a loader stuck without timeout= cannot keep the kernel from exiting.
        threading.Thread(target=self._loop, args=(n,), daemon=True,
                         name=f"labkit-dashboard-run{n}").start()

    def run(self, config: dict | None = None) -> DashboardRun:
        """Run one pass in this thread (headless notebooks, tests) and return its result."""
        return self._loop(self._begin(config))

    def stop(self) -> None:
        """Ask the run to stop; it does after the batch in flight, then shuts down workers."""
        with self._lock:
            if self.state == "running":
                self.state = "stopping"
                self._stop.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the run (and its finish callbacks) is over; False on timeout."""
        return self._done.wait(timeout)

    def best(self) -> DashboardRun | None:
        """The past run with the highest samples_per_s, errors excluded; None if none."""
        ok = [r for r in self.runs if not r.status.startswith("error") and r.samples]
        return max(ok, key=lambda r: r.samples_per_s, default=None)

    def _begin(self, config: dict | None) -> int:
        with self._lock:
            if self.running:
                raise LabkitError("a run is in progress; stop it (or wait) before starting another")
            for name, value in (config or {}).items():
                self._check(name, value)  # all or nothing: a typo must not half-apply a config
            self.config.update(config or {})
            self.state, self.error, self.run_config = "running", None, dict(self.config)
            self._stop.clear()
            self._done.clear()
            self.series = []
            self.history.append(self.series)
            return len(self.history)

    def _call(self, fns: list[Callable]) -> None:
        for fn in fns:
            try:
                fn(self)
            except Exception:
                # A broken plot callback must not kill (or hang) the measurement.
                log.exception("dashboard callback %r failed", fn)

    def _epochs(self, loader: Iterable) -> Iterator:  # epochs=None: until stopped
        epoch = 0
        while not self._stop.is_set():
            yield from loader
            epoch += 1
            if self.epochs is not None and epoch >= self.epochs:
                return

    def _loop(self, n: int) -> DashboardRun:
        cfg = self.run_config
        clock = time.perf_counter
        recv: list[float] = []  # when each batch arrived, and when its step was done: the
        ends: list[float] = []  # run's clock, with the callbacks' time taken out
        win, win_start, off = [0, 0, 0.0], 0.0, 0.0   # a window's batches, samples, wait
        first: dict = {}  # the first batch's samples, bytes per sample and tensors (lk.measure's)
        samples, status, loader = 0, "done", None
        t0 = clock()

        def on_batch(batch, asked, got, done) -> bool:
            nonlocal samples, win, win_start, off
            got, done = got - off, done - off
            if not first:
                sizer = make_sizer(batch)
                k = sizer(batch)
                first.update(sizer=sizer, samples=k, nbytes=batch_nbytes(batch) / max(k, 1),
                             tensors=batch_tensors(batch))
            k = first["sizer"](batch)
            samples += k
            win = [win[0] + 1, win[1] + k, win[2] + got - (ends[-1] if ends else t0)]
            recv.append(got)
            ends.append(done)
            if done - t0 - win_start >= self.window_s:
                # callbacks (plot renders) are left off the run's clock, not to lower its rate
                t_s = done - t0
                off += self._point(t_s, win_start, win)
                win, win_start = [0, 0, 0.0], t_s
            return (self._stop.is_set()
                    or (self.max_batches is not None and len(ends) >= self.max_batches)
                    or (self.max_seconds is not None and done - t0 >= self.max_seconds))

        try:
            loader = self.make_loader(dict(cfg))
            t0 = clock()  # as in lk.measure: from iter(), the loader already built
            timed_steps(self._epochs(loader), self.step, on_batch)
            # the last, partial window: if long enough not to draw a false dip, or the only one
            end = (ends[-1] if ends else clock() - off) - t0
            if win[0] and (not self.series or end - win_start >= self.window_s / 2):
                self._point(end, win_start, win)
            if self._stop.is_set():
                status = "stopped"
        except KeyboardInterrupt:
            status = "stopped"  # a kernel interrupt during run(): record it, then re-raise
            raise
        except Exception as e:
            self.error = f"{type(e).__name__}: {e}"
            status = f"error: {self.error}"
            log.error("dashboard run %d failed: %s", n, self.error, exc_info=True)
        finally:
            # the last reference to the loader (the loop dropped its iterator): workers stop
            loader = None
            if status.startswith("error"):
                gc.collect()  # a re-raised worker error holds the iterator in a reference cycle
            p = stamped_pass(t0, recv, ends if self.step is not None else None,
                             samples=samples, first_samples=first.get("samples", 0),
                             nbytes_per_sample=first.get("nbytes", 0.0),
                             tensors=first.get("tensors", 0))
            result = DashboardRun(name=f"run {n}", config=dict(cfg), passes=[p],
                                  step=step_name(self.step), run=n, status=status)
            with self._lock:
                self.runs.append(result)
                self.state = status.split(":")[0]
            self._call(self._finish_fns)
            self._done.set()
        return result

    def _point(self, t_s: float, start: float, win: list) -> float:
        span = t_s - start
        self.series.append({"t_s": t_s, "samples_per_s": rate(win[1], span),
                            "wait_fraction": wait_fraction(win[2], span)})
        t = time.perf_counter()
        self._call(self._update_fns)
        return time.perf_counter() - t


class Dashboard:
    """Knobs, Run/Stop, live plot and table around a :class:`DashboardModel` (chapter 01)."""

    min_render_s = 0.25  # at most ~4 PNG renders a second: each costs tens of ms of CPU

    def __init__(self, make_loader: Callable[[dict], Iterable],
                 step: Callable[[Any], Any] | None = None, knobs: dict[str, list] | None = None,
                 max_batches: int | None = None, max_seconds: float | None = None,
                 title: str = "Throughput", epochs: int | None = 1):
        # Imported here so that `import labkit` stays fast and the model works without widgets.
        import ipywidgets as w

        self.title = title
        self.model = DashboardModel(make_loader, step, knobs, max_batches, max_seconds,
                                    epochs=epochs)
        self.controls: dict[str, Any] = {}
        for name, options in self.model.knobs.items():
            if set(options) == {False, True} and all(isinstance(o, bool) for o in options):
                c = w.Checkbox(value=self.model.config[name], description=name)
            else:
                c = w.Dropdown(options=[(str(o), o) for o in options],
                               value=self.model.config[name], description=name)
            c.observe(lambda ch, name=name: self.model.set(name, ch["new"]), names="value")
            self.controls[name] = c
        self.run_button = w.Button(description="Run", button_style="success", icon="play")
        self.stop_button = w.Button(description="Stop", button_style="danger", icon="stop",
                                    disabled=True)
        self.run_button.on_click(self._on_run)
        self.stop_button.on_click(self._on_stop)
        self.status, self.plot, self.table = w.Label(value="idle"), w.Image(format="png"), w.HTML()
        self.widget = w.VBox([  # what the notebook shows
            w.HBox(list(self.controls.values()), layout=w.Layout(flex_flow="row wrap")),
            w.HBox([self.run_button, self.stop_button, self.status]), self.plot, self.table])
        self._last_render, self._render_lock = 0.0, threading.Lock()
        self.model.on_update(self._on_update)
        self.model.on_finish(self._on_finish)
        self.render()

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    def run_sync(self, **overrides: Any) -> DashboardRun:
        """Set the knobs, run in this thread; a failed run raises (a broken chapter fails CI)."""
        if self.model.running:
            raise LabkitError("a run is in progress; press Stop (or wait) before run_sync()")
        for name, value in overrides.items():
            self.model.set(name, value)  # validates with a clear message before the widget
            self.controls[name].value = value
        self._set_running(True)
        r = self.model.run()
        if r.status.startswith("error"):
            raise LabkitError(f"dashboard run {r.run} failed: {self.model.error}")
        return r

    def _on_run(self, _button: Any = None) -> None:
        try:
            self._set_running(True)
            self.model.start()
        except Exception as e:
            self._set_running(False)
            self.status.value = f"cannot start: {e}"

    def _on_stop(self, _button: Any = None) -> None:
        self.model.stop()
        self.status.value = "stopping after the batch in flight..."

    def _set_running(self, running: bool) -> None:
        self.run_button.disabled = running
        self.stop_button.disabled = not running
        for c in self.controls.values():
            c.disabled = running  # a knob changed mid-run would not apply until the next run
        if running:
            self.status.value = "running..."

    def _on_update(self, model: DashboardModel) -> None:
        if time.monotonic() - self._last_render >= self.min_render_s:
            p = model.series[-1]
            self.status.value = (f"running: {p['samples_per_s']:,.0f} samples/s, "
                                 f"waiting for data {p['wait_fraction']:.0%} of the time")
            self.render()

    def _on_finish(self, model: DashboardModel) -> None:
        r = model.runs[-1]
        self.status.value = f"run {r.run} {r.status}: {r.samples_per_s:,.0f} samples/s"
        self.render()
        self._set_running(False)

    def render(self) -> None:
        """Redraw the plot and the table from the model (safe from the run's thread)."""
        with self._render_lock:
            self._last_render = time.monotonic()
            self.plot.value = self._png()
            self.table.value = self._html()

    def _png(self) -> bytes:
        # Agg, not pyplot: pyplot's global state is unsafe off the main thread.
        fig = agg_figure(figsize=(7.5, 4), dpi=80)
        ax1, ax2 = fig.subplots(2, 1, sharex=True)
        history = list(self.model.history)
        faded = {"color": "grey", "alpha": 0.3, "lw": 1}
        for i, series in enumerate(history):
            pts = list(series)  # a snapshot: the run's thread may be appending
            for ax, key, color in ((ax1, "samples_per_s", "C0"), (ax2, "wait_fraction", "C3")):
                ax.plot([p["t_s"] for p in pts], [p[key] for p in pts], marker=".",
                        **({"color": color, "lw": 2} if i == len(history) - 1 else faded))
        ax1.set(ylabel="samples/s", ylim=(0, None))
        ax2.set(ylabel="data-wait fraction", ylim=(0, 1.05), xlabel="seconds into the run")
        knobs = ", ".join(f"{k}={v}" for k, v in self.model.run_config.items())
        fig.suptitle(f"{self.title}: run {len(history)} ({knobs})" if history else self.title)
        fig.tight_layout()
        return png_bytes(fig)

    def _html(self) -> str:
        runs = list(self.model.runs)
        if not runs:
            return "<i>no runs yet</i>"
        best = self.model.best()
        cols = ["run", *self.model.knobs, "batches", "samples", "seconds", "samples_per_s",
                "wait_fraction", "first_batch_s", "status"]

        def cell(v: Any) -> str:
            if v is None or v != v:  # None, or NaN (a run that got no batch)
                v = ""
            elif isinstance(v, float):
                v = f"{v:,.3g}" if v < 10 else f"{v:,.0f}"
            return f"<td>{html.escape(str(v))}</td>"

        rows = []
        for r in reversed(runs):
            row = {**r.config, "seconds": r.passes[0].epoch_s}  # the rest are r's attributes
            bold = ' style="font-weight:bold"' if r is best else ""
            rows.append(f"<tr{bold}>" + "".join(cell(row[c] if c in row else getattr(r, c, ""))
                                                for c in cols) + "</tr>")
        head = "".join(f"<th>{c}</th>" for c in cols)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
