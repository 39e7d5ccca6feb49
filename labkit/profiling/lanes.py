"""Drawing a timeline as lanes: one per worker, one for the training loop (chapter 13).

Each worker lane shows every batch it made (fetching the samples, then collating them,
labelled with the batch index); the loop lane shows waiting for data and the step. Gaps in
a worker lane are a worker with nothing to do (its queue is full: the step is the bound);
a loop lane mostly red is a loop waiting for data (the loader is the bound).
"""

from __future__ import annotations

from ..display.figures import agg_figure, done, png_bytes, subplots

COLORS = {"fetch": "#4C72B0", "collate": "#DD8452", "wait": "#C44E52", "step": "#55A868"}


def draw_lanes(tl, ax=None, title: str | None = None):
    """Draw ``tl`` (a :class:`Timeline`) on ``ax`` (new figure if None); return the figure."""
    from matplotlib.patches import Patch


    own = ax is None
    if own:
        fig, ax = subplots(figsize=(10, 1.2 + 0.45 * (len({b["worker"] for b in tl.batches}) + 1)))
    else:
        fig = ax.figure
    workers = sorted({b["worker"] for b in tl.batches})
    lanes = {w: i + 1 for i, w in enumerate(workers)}
    h = 0.8
    for b in tl.batches:
        y = lanes[b["worker"]] - h / 2
        ax.broken_barh([(b["start"], b["fetched"] - b["start"])], (y, h), color=COLORS["fetch"])
        ax.broken_barh([(b["fetched"], b["end"] - b["fetched"])], (y, h),
                       color=COLORS["collate"])
        if len(tl.batches) <= 40:
            ax.text((b["start"] + b["end"]) / 2, lanes[b["worker"]], str(b["batch"]),
                    ha="center", va="center", fontsize=7, color="white")
    for r in tl.loop:
        ax.broken_barh([(r["asked"], r["got"] - r["asked"])], (-h / 2, h), color=COLORS["wait"])
        ax.broken_barh([(r["got"], r["done"] - r["got"])], (-h / 2, h), color=COLORS["step"])
    names = ["loop"] + [("main process" if w < 0 else f"worker {w}") for w in workers]
    ax.set_yticks(range(len(names)), names)
    ax.set_xlabel("seconds since iter(loader)")
    ax.set_ylim(-0.6, len(names) - 0.4)
    ax.set_xlim(left=0)  # from iter(): the blank start is worker start-up
    ax.set_title(title or f"{tl.name}: waiting {tl.wait_fraction:.0%} of the loop")
    ax.legend(handles=[Patch(color=c, label=k) for k, c in COLORS.items()],
              loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    return done(fig) if own else fig


def timeline_png(tl, title: str | None = None) -> bytes:
    """The lanes of ``tl`` as PNG bytes (off pyplot: safe from any thread, for files)."""
    fig = agg_figure(figsize=(10, 1.2 + 0.45 * (len({b["worker"] for b in tl.batches}) + 1)))
    ax = fig.add_subplot()
    draw_lanes(tl, ax=ax, title=title)
    fig.tight_layout()
    return png_bytes(fig, dpi=100)


def plot_timelines(timelines, titles=None):
    """Several timelines stacked, one panel each, on a shared time axis (chapter 13)."""
    lanes = [len({b["worker"] for b in t.batches}) + 1 for t in timelines]
    fig, axes = subplots(len(timelines), 1, sharex=True, squeeze=False,
                         figsize=(10, 0.8 * len(timelines) + 0.45 * sum(lanes)),
                         gridspec_kw={"height_ratios": lanes})
    for i, (tl, ax) in enumerate(zip(timelines, axes[:, 0], strict=True)):
        draw_lanes(tl, ax=ax, title=titles[i] if titles else None)
        if i:
            ax.get_legend().remove()
        if i < len(timelines) - 1:
            ax.set_xlabel("")
    return done(fig)
