"""Plots a person would rather look at than read: throughput, scaling (ch. 01-16)."""

from __future__ import annotations

from .figures import done


def plot_throughput(measurements, baseline: int = 0, title: str | None = None,
                    log: bool | None = None, gb_per_s: bool = False):
    """Bars of samples/s (median, min-max whiskers) x baseline, log past a 50x spread (``log``);
    ``gb_per_s`` adds GB/s (chapters 02, 12: many tiny samples can be few bytes a second)."""
    import matplotlib.pyplot as plt

    ms = list(measurements)
    names = [m.name for m in ms]
    med = [m.samples_per_s for m in ms]
    lo = [m.samples_per_s - m.samples_per_s_range[0] for m in ms]
    hi = [m.samples_per_s_range[1] - m.samples_per_s for m in ms]
    base = med[baseline]
    fig, axes = plt.subplots(1, 1 + gb_per_s, figsize=(8 + 4 * gb_per_s, 0.6 * len(ms) + 1.4),
                             sharey=True, squeeze=False)
    ax = axes[0, 0]
    ax.barh(names, med, xerr=[lo, hi], color="tab:blue", alpha=0.8, capsize=3)
    ax.invert_yaxis()
    if log if log is not None else max(med) > 50 * min(med):
        ax.set_xscale("log")
    for y, v in enumerate(med):
        ax.text(v, y, f"  {v:,.0f}/s  x{v / base:.2f}", va="center", fontsize=9)
    ax.set(xlabel="samples/s (median of passes; whiskers: min-max)",
           title=title or f"throughput, relative to {names[baseline]}", xmargin=0.35)
    if gb_per_s:
        ax = axes[0, 1]
        gb = [m.bytes_per_s / 1e9 for m in ms]
        ax.barh(names, gb, color="tab:green", alpha=0.8)
        if max(gb) > 50 * max(min(gb), 1e-12):
            ax.set_xscale("log")
        for y, v in enumerate(gb):
            ax.text(v, y, f"  {v:.2f}", va="center", fontsize=9)
        ax.set(xlabel="GB/s (median of passes)", xmargin=0.3)
    return done(fig)


def plot_scaling(workers, measured, ideal, *, title: str, ylabel: str = "samples/s",
                 cores: int | None = None):
    """Measured throughput against workers next to the ideal line (chapters 09 and 10)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    ax.plot(workers, ideal, "--", color="grey", marker="o", label="ideal (from 1 worker)")
    ax.plot(workers, measured, color="tab:blue", marker="o", lw=2, label="measured")
    if cores is not None:
        ax.axvline(cores, color="tab:red", alpha=0.5, lw=1)
        ax.text(cores, max(max(ideal), max(measured)) * 0.05, f" {cores} cores",
                color="tab:red", fontsize=9)
    ax.set(xlabel="num_workers", ylabel=ylabel, ylim=(0, None), title=title)
    ax.legend(fontsize=8)
    return done(fig)

