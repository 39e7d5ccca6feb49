"""Plots a person would rather look at than read: throughput side by side, wait vs compute.

Each function returns a matplotlib Figure (closed, so a notebook shows it exactly once).
Introduced in chapter 01.
"""

from __future__ import annotations


def _plt():
    import matplotlib.pyplot as plt

    return plt


def plot_throughput(measurements, baseline: int = 0, title: str | None = None,
                    log: bool | None = None):
    """Horizontal bars of samples/s (median, min-max whiskers), each labelled x baseline.

    A log axis is chosen automatically when the fastest is 50x the slowest.
    """
    plt = _plt()
    ms = list(measurements)
    names = [m.name for m in ms]
    med = [m.samples_per_s for m in ms]
    lo = [m.samples_per_s - m.samples_per_s_range[0] for m in ms]
    hi = [m.samples_per_s_range[1] - m.samples_per_s for m in ms]
    base = med[baseline]
    fig, ax = plt.subplots(figsize=(8, 0.6 * len(ms) + 1.4))
    ax.barh(names, med, xerr=[lo, hi], color="tab:blue", alpha=0.8, capsize=3)
    ax.invert_yaxis()
    if log if log is not None else max(med) > 50 * min(med):
        ax.set_xscale("log")
    for y, v in enumerate(med):
        ax.text(v, y, f"  {v:,.0f}/s  x{v / base:.2f}", va="center", fontsize=9)
    ax.set_xlabel("samples/s (median of passes; whiskers: min-max)")
    ax.set_title(title or f"throughput, relative to {names[baseline]}")
    ax.margins(x=0.35)
    fig.tight_layout()
    plt.close(fig)
    return fig


def plot_wait_compute(measurements, title: str | None = None):
    """Stacked bars: share of loop time waiting for data vs computing, per measurement."""
    plt = _plt()
    ms = [m for m in measurements if m.step is not None]
    if not ms:
        raise ValueError("plot_wait_compute needs measurements taken with a step=")
    names = [m.name for m in ms]
    wait = [m.wait_fraction for m in ms]
    fig, ax = plt.subplots(figsize=(8, 0.6 * len(ms) + 1.4))
    ax.barh(names, wait, color="tab:red", label="waiting for data")
    ax.barh(names, [1 - w for w in wait], left=wait, color="tab:green", label="computing")
    ax.invert_yaxis()
    for y, w in enumerate(wait):
        ax.text(0.01, y, f"{w:.0%} waiting", va="center", color="white", fontsize=9)
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of steady-state loop time")
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title(title or "where the training loop's time goes")
    fig.tight_layout()
    plt.close(fig)
    return fig


def plot_rates(measurements, title: str | None = None):
    """Two panels side by side: samples/s and GB/s (medians), one bar per measurement.

    Introduced in chapter 02 for access patterns, where the two rates tell different
    stories: many tiny samples per second can still be few bytes per second.
    """
    plt = _plt()
    ms = list(measurements)
    names = [m.name for m in ms]
    fig, axes = plt.subplots(1, 2, figsize=(10, 0.5 * len(ms) + 1.6), sharey=True)
    for ax, values, label, fmt in (
            (axes[0], [m.samples_per_s for m in ms], "samples/s", "{:,.0f}"),
            (axes[1], [m.bytes_per_s / 1e9 for m in ms], "GB/s", "{:.2f}")):
        colors = ["tab:blue" if "cold" not in n else "tab:orange" for n in names]
        ax.barh(names, values, color=colors, alpha=0.85)
        if max(values) > 50 * max(min(values), 1e-12):
            ax.set_xscale("log")
        for y, v in enumerate(values):
            ax.text(v, y, "  " + fmt.format(v), va="center", fontsize=8)
        ax.set_xlabel(f"{label} (median of passes)")
        ax.margins(x=0.3)
    axes[0].invert_yaxis()
    fig.suptitle(title or "access patterns: samples/s and GB/s (orange: cold page cache)")
    fig.tight_layout()
    plt.close(fig)
    return fig


def plot_worker_memory(traces, kind: str = "uss", title: str | None = None):
    """Per-worker USS (or PSS) against batches delivered, one panel per dataset (chapter 03).

    ``traces``: :class:`~labkit.memory.WorkerMemory` objects from ``lk.worker_memory``.
    """
    plt = _plt()
    traces = list(traces)
    fig, axes = plt.subplots(1, len(traces), figsize=(4 * len(traces), 3.2), sharey=True,
                             squeeze=False)
    for ax, t in zip(axes[0], traces, strict=True):
        series = getattr(t, kind)
        for w, values in series.items():
            ax.plot(t.batches[:len(values)], [v / 2 ** 20 for v in values], marker=".", label=w)
        ax.set_title(t.name, fontsize=10)
        ax.set_xlabel("batches delivered")
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel(f"{kind.upper()} per worker (MiB)")
    fig.suptitle(title or f"worker memory over one epoch ({kind.upper()})")
    fig.tight_layout()
    plt.close(fig)
    return fig
