"""Random-clip cost against the keyframe interval, and what decoding less buys (chapter 15).

Drawn through the kit's one figure scaffold, :mod:`labkit.display.figures`.
"""

from __future__ import annotations

from ..display.figures import done, subplots


def plot_clip_costs(costs: dict, savings: dict | None = None, title: str | None = None):
    """Left: ms per random clip against keyframe interval, one line per decoder setting
    (``costs = {label: {keyframe_interval: ms}}``). Right (if given): ms per clip of each
    "decode less" option (``savings = {label: ms}``)."""
    panels = 2 if savings else 1
    fig, axes = subplots(1, panels, figsize=(5.5 * panels + 1, 3.8), squeeze=False)
    ax = axes[0][0]
    for label, by_gop in costs.items():
        gops = sorted(by_gop)
        ax.plot(gops, [by_gop[g] for g in gops], marker="o", lw=2, label=label)
    ax.set_xscale("log")
    ax.set_xlabel("keyframe interval (frames, log)")
    ax.set_ylabel("ms per random clip (one core)")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    ax.set_title("seek cost grows with the keyframe interval")
    if savings:
        ax = axes[0][1]
        names = list(savings)
        ax.barh(names, [savings[n] for n in names], color="tab:green", alpha=0.85)
        for y, n in enumerate(names):
            ax.text(savings[n], y, f"  {savings[n]:.2f} ms", va="center", fontsize=8)
        ax.invert_yaxis()
        ax.margins(x=0.3)
        ax.set_xlabel("ms per clip (one core)")
        ax.set_title("decode less")
    if title:
        fig.suptitle(title)
    return done(fig)
