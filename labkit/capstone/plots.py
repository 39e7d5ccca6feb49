"""The capstone's plots: the tuning walk and the cross-library bake-off (chapter 16).

Each returns a matplotlib Figure (closed, so a notebook shows it exactly once).
"""

from __future__ import annotations

from ..display.figures import done, subplots


def plot_tuning(results, title: str | None = None):
    """The capstone's steps: samples/s after each change, the gain of each (chapter 16).

    Left: whole-pass samples/s of each step, labelled with its gain over the naive step;
    hatched bars are changes that were reverted (they did not beat the best so far). Right:
    each change's gain over the best configuration before it (1.0 = no change; below 1, a
    change that did not help on this machine).
    """
    rs = list(results)
    names = [r.step.name for r in rs]
    rates = [r.samples_per_s for r in rs]
    gains = [r.gain for r in rs]
    kept = [r.kept for r in rs]
    fig, (ax1, ax2) = subplots(1, 2, figsize=(11, 0.45 * len(rs) + 2.2), sharey=True)
    ax1.barh(names, rates, color=["tab:blue" if k else "white" for k in kept],
             edgecolor="tab:blue", hatch=[None if k else "//" for k in kept], alpha=0.85)
    ax1.invert_yaxis()
    for y, (v, k) in enumerate(zip(rates, kept, strict=True)):
        ax1.text(v, y, f"  {v:,.0f}/s  x{v / rates[0]:.2f}" + ("" if k else "  (reverted)"),
                 va="center", fontsize=9)
    ax1.set_xlabel("samples/s, whole pass with the train step (median)")
    ax1.margins(x=0.45)
    colors = ["grey"] + ["tab:green" if g >= 1.05 else "tab:red" if g < 0.95 else "tab:orange"
                         for g in gains[1:]]
    ax2.barh(names, [g - 1 for g in gains], left=1, color=colors)
    ax2.axvline(1, color="black", lw=0.8)
    for y, g in enumerate(gains[1:], start=1):
        ax2.text(max(g, 1), y, f"  x{g:.2f}", va="center", fontsize=9)
    ax2.set_xlabel("gain of this change over the best configuration before it")
    ax2.margins(x=0.3)
    final = [v for v, k in zip(rates, kept, strict=True) if k][-1]
    fig.suptitle(title or f"naive to tuned: x{final / rates[0]:.2f}")
    return done(fig)


def plot_bakeoff(results, title: str | None = None):
    """The bake-off: samples/s per loader, x the torch map-style baseline (chapter 16).

    Loaders that ran are bars (red when the exactly-once audit failed); skipped or failed
    ones are listed under the plot with their reason cut short.
    """
    ran = [r for r in results if r.ok]
    rest = [r for r in results if not r.ok]
    bars_h, text_h = 0.5 * len(ran) + 1.6, (0.17 * len(rest) + 0.25 if rest else 0.0)
    fig, ax = subplots(figsize=(9, bars_h + text_h))
    names = [f"{r.name} ({r.version})" for r in ran]
    rates = [r.samples_per_s for r in ran]
    colors = ["tab:blue" if r.audit.ok else "tab:red" for r in ran]
    ax.barh(names, rates, color=colors, alpha=0.85)
    ax.invert_yaxis()
    for y, r in enumerate(ran):
        mark = "" if r.audit.ok else "  NOT exactly once"
        ax.text(rates[y], y, f"  {rates[y]:,.0f}/s  x{r.ratio:.2f}{mark}", va="center",
                fontsize=9)
    ax.set_xlabel("samples/s, whole pass with the same train step (median)")
    ax.margins(x=0.3)
    ax.set_title(title or "one fixture, one train step, every installed loader")
    if rest:
        # the reason without its install hint (the table has it): one short line each
        text = "\n".join(f"{r.name}: {'skipped' if r.skipped else 'failed'}: "
                         f"{(r.skipped or r.error).split('; install')[0][:90]}" for r in rest)
        fig.text(0.01, 0.01, text, fontsize=7, va="bottom", color="dimgrey")
    return done(fig, rect=(0, text_h / (bars_h + text_h), 1, 1))


# -- token pipelines (chapter 11) -----------------------------------------------------------
