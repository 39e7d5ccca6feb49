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


def plot_shuffle_quality(results: dict, metric: str = "same_shard_neighbours",
                         reference: float | None = None, title: str | None = None):
    """One line per loader: a shuffle-quality ``metric`` against buffer size (chapter 08).

    Args:
        results: ``{loader name: [(buffer_size, lk.shuffle_quality(...) dict), ...]}``.
        reference: a horizontal line, e.g. the metric's value for a full permutation.
    """
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, points in results.items():
        xs = [max(1, b) for b, _ in points]
        ax.plot(xs, [q[metric] for _, q in points], marker="o", label=name)
    if reference is not None:
        ax.axhline(reference, color="grey", linestyle="--", label="full permutation")
    ax.set_xscale("log")
    ax.set_xlabel("shuffle buffer size (samples; 1 = no buffer)")
    ax.set_ylabel(metric.replace("_", " "))
    ax.set_title(title or f"shuffle quality: {metric.replace('_', ' ')}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    plt.close(fig)
    return fig
