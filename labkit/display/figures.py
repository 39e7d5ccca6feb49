"""The one figure scaffold every plot, dashboard and report starts from (every chapter).

:func:`subplots` / :func:`done`: pyplot figures a cell shows once; :func:`agg_figure` /
:func:`png_bytes`: an Agg ``Figure`` off pyplot's global state (other threads, PNG files).
"""

from __future__ import annotations

import io


def subplots(*args, **kwargs):
    """A new pyplot figure and its axes (``plt.subplots``); finish it with :func:`done`."""
    import matplotlib.pyplot as plt

    return plt.subplots(*args, **kwargs)


def done(fig):
    """Lay the figure out (``tight_layout``), close it, return it."""
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
