"""The one figure scaffold every plot, dashboard and report starts from (every chapter)."""

from __future__ import annotations

import io


def done(fig):
    """Lay the pyplot figure out, close it (so a notebook shows it once), return it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    plt.close(fig)
    return fig


def agg_figure(**kwargs):
    """A ``Figure`` with its own Agg canvas, safe off the main thread (no pyplot)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(**kwargs)
    FigureCanvasAgg(fig)
    return fig


def png_bytes(fig, dpi: float | None = None) -> bytes:
    """The figure rendered to PNG bytes."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()
