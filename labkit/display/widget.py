"""The dashboard's widgets: knobs, Run/Stop, a live PNG plot and the runs table (ch. 01 on)."""

from __future__ import annotations

import html
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from ..errors import LabkitError
from .dashboard import DashboardModel, DashboardRun
from .figures import agg_figure, png_bytes


class Dashboard:
    """Widgets around a :class:`DashboardModel`: knobs, Run/Stop, live plot, table (chapter
    01); end a cell with it to show it, or call :meth:`run_sync` headless."""

    min_render_s = 0.25  # at most ~4 PNG renders a second: each costs tens of ms of CPU

    def __init__(self, make_loader: Callable[[dict], Iterable],
                 step: Callable[[Any], Any] | None = None, knobs: dict[str, list] | None = None,
                 defaults: dict | None = None, max_batches: int | None = None,
                 max_seconds: float | None = None, title: str = "Throughput",
                 epochs: int | None = 1):
        # Imported here so that `import labkit` stays fast and the model works without widgets.
        import ipywidgets as w

        self.title = title
        self.model = DashboardModel(make_loader, step, knobs, defaults, max_batches, max_seconds,
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
        self.stop_button.on_click(lambda _: self._on_stop())
        self.status = w.Label(value="idle")
        self.plot = w.Image(format="png")
        self.table = w.HTML()
        self._widget = w.VBox([
            w.HBox(list(self.controls.values()), layout=w.Layout(flex_flow="row wrap")),
            w.HBox([self.run_button, self.stop_button, self.status]),
            self.plot,
            self.table,
        ])
        self._last_render = 0.0
        self._render_lock = threading.Lock()
        self.model.on_update(self._on_update)
        self.model.on_finish(self._on_finish)
        self.render()

    @property
    def widget(self):
        """The assembled ipywidgets VBox."""
        return self._widget

    def _repr_mimebundle_(self, **kwargs):
        return self._widget._repr_mimebundle_(**kwargs)

    def run_sync(self, raise_on_error: bool = True, **overrides: Any) -> DashboardRun:
        """Set the given knobs, run in this thread, refresh, return the :class:`DashboardRun`;
        a failed run raises (``raise_on_error``), so a broken chapter fails its cell in CI."""
        if self.model.running:
            raise LabkitError("a run is in progress; press Stop (or wait) before run_sync()")
        for name, value in overrides.items():
            self.model.set(name, value)  # validates with a clear message before the widget
            self.controls[name].value = value
        self._set_running(True)
        r = self.model.run()
        if raise_on_error and r.status.startswith("error"):
            raise LabkitError(f"dashboard run {r.run} failed: {self.model.error}")
        return r

    def _on_run(self, _button: Any = None) -> None:
        try:
            self._set_running(True)
            self.model.start()
        except Exception as e:
            self._set_running(False)
            self.status.value = f"cannot start: {e}"

    def _on_stop(self) -> None:
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
            self.status.value = (
                f"running: {p['samples_per_s']:,.0f} samples/s, "
                f"waiting for data {p['wait_fraction']:.0%} of the time"
            )
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
            current = i == len(history) - 1
            pts = list(series)  # a snapshot: the run's thread may be appending
            t = [p["t_s"] for p in pts]
            ax1.plot(t, [p["samples_per_s"] for p in pts], marker=".",
                     **({"color": "C0", "lw": 2} if current else faded))
            ax2.plot(t, [p["wait_fraction"] for p in pts], marker=".",
                     **({"color": "C3", "lw": 2} if current else faded))
        ax1.set_ylabel("samples/s")
        ax1.set_ylim(bottom=0)
        ax2.set_ylabel("data-wait fraction")
        ax2.set_ylim(0, 1.05)
        ax2.set_xlabel("seconds into the run")
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
            row = {"run": r.run, **r.config, "batches": r.batches, "samples": r.samples,
                   "seconds": r.passes[0].epoch_s, "samples_per_s": r.samples_per_s,
                   "wait_fraction": r.wait_fraction, "first_batch_s": r.first_batch_s,
                   "status": r.status}
            bold = ' style="font-weight:bold"' if r is best else ""
            rows.append(f"<tr{bold}>" + "".join(cell(row.get(c, "")) for c in cols) + "</tr>")
        head = "".join(f"<th>{c}</th>" for c in cols)
        body = "".join(rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
