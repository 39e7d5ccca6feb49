"""The break-even widget: image size and disk speed sliders around a BreakEven (chapter 12c).

All logic is in :class:`~labkit.formats.breakeven.BreakEven`; this only wires ipywidgets
controls, a PNG plot and a summary line to it.
"""

from __future__ import annotations

import math

from ..display.figures import agg_figure, png_bytes
from .breakeven import BreakEven


class BreakEvenWidget:
    """Two sliders (training image size, disk MB/s) and the break-even plot they move.

    End a cell with it to show it; ``widget.model.set(...)`` moves it from code (and the
    sliders follow).
    """

    def __init__(self, model: BreakEven, *, sizes=None):
        import ipywidgets as w

        self.model = model
        base = model.measured_size
        sizes = sorted({int(s) for s in (sizes or (base // 4, base // 2, base, 2 * base,
                                                   4 * base)) if s > 0} | {model.size})
        self.size = w.SelectionSlider(options=sizes, value=model.size,
                                      description="image px", continuous_update=False)
        self.disk = w.FloatLogSlider(value=model.disk_bytes_per_s / 1e6, base=10, min=0,
                                     max=4.5, step=0.05, description="disk MB/s",
                                     continuous_update=False, readout_format=",.0f")
        self.size.observe(lambda ch: self._moved(size=ch["new"]), names="value")
        self.disk.observe(lambda ch: self._moved(disk_mb_per_s=ch["new"]), names="value")
        self.plot = w.Image(format="png")
        self.text = w.HTML()
        self._widget = w.VBox([w.HBox([self.size, self.disk]), self.plot, self.text])
        self._syncing = False  # render() moving a slider to the model's value: not a move
        model.on_change(lambda _: self.render())
        self.render()

    def _moved(self, **knobs) -> None:
        if not self._syncing:
            self.model.set(**knobs)

    @property
    def widget(self):
        """The assembled ipywidgets VBox."""
        return self._widget

    def _repr_mimebundle_(self, **kwargs):
        return self._widget._repr_mimebundle_(**kwargs)

    def render(self) -> None:
        """Redraw from the model; the sliders show the model's values."""
        m = self.model
        self._syncing = True
        try:
            if m.size not in self.size.options:  # a size set from code
                self.size.options = sorted({*self.size.options, m.size})
            self.size.value = m.size
            if not math.isclose(self.disk.value, m.disk_bytes_per_s / 1e6, rel_tol=1e-9):
                self.disk.value = m.disk_bytes_per_s / 1e6
        finally:
            self._syncing = False
        fig = agg_figure(figsize=(7.5, 4), dpi=80)
        m.draw(fig.subplots())
        fig.tight_layout()
        self.plot.value = png_bytes(fig)
        self.text.value = "<pre>" + m.summary() + "</pre>"
