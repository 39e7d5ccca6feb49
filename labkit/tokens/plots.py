"""Token pipelines' plots: document lengths, token rates, packing (chapters 11, 11b).

Each returns a matplotlib Figure (closed, so a notebook shows it exactly once).
"""

from __future__ import annotations

import numpy as np

from ..display.figures import done, subplots


def plot_doc_lengths(corpus, context: int):
    """Histogram (log-spaced bins) of tokens per document, one colour per source."""
    lengths = corpus.lengths
    bins = np.logspace(0, np.log10(lengths.max() + 1), 40)
    fig, ax = subplots(figsize=(8, 3.2))
    for s, name in enumerate(corpus.source_names or ("all",)):
        ax.hist(lengths[corpus.sources == s], bins=bins, alpha=0.6, label=name)
    ax.axvline(context, color="k", ls="--", lw=1)
    share = lengths[lengths > context].sum() / lengths.sum()
    ax.text(context, ax.get_ylim()[1] * 0.9, f"  context {context}: {share:.0%} of tokens "
            "are in longer documents", fontsize=9)
    ax.set_xscale("log")
    ax.set_xlabel("tokens per document (log)")
    ax.set_ylabel("documents")
    ax.legend(fontsize=8)
    ax.set_title("document lengths by source")
    return done(fig)


def plot_token_rates(rates: dict[str, float], needed: dict[str, float]):
    """Bars of tokens/s each sampler delivered; dashed lines: what training each model needs."""
    names = list(rates)
    fig, ax = subplots(figsize=(8, 0.55 * len(names) + 1.8))
    ax.barh(names, [rates[n] for n in names], color="tab:blue", alpha=0.8)
    ax.invert_yaxis()
    for y, n in enumerate(names):
        ax.text(rates[n], y, f"  {rates[n] / 1e6:,.1f} M/s", va="center", fontsize=9)
    for i, (model, need) in enumerate(needed.items()):
        ax.axvline(need, color=f"C{i + 1}", ls="--", lw=1, label=f"{model}: {need:,.0f}/s")
    ax.set_xscale("log")
    ax.set_xlabel("tokens/s (log); dashed: tokens/s one accelerator trains on")
    ax.legend(fontsize=8, loc="lower right")
    ax.margins(x=0.3)
    ax.set_title("random windows delivered (one core) vs tokens training consumes")
    return done(fig)


def plot_packing(stats: list[dict]):
    """Per packer: padding, cropped tokens and cross-document attention pairs (shares)."""
    names = [s["method"] for s in stats]
    keys = [("padding", "padding"), ("cropped", "cropped"),
            ("cross_attention_pairs", "cross-doc attention without a mask")]
    y = np.arange(len(names))
    fig, ax = subplots(figsize=(8, 0.6 * len(names) + 1.6))
    for i, (k, label) in enumerate(keys):
        ax.barh(y + (i - 1) * 0.27, [s[k] for s in stats], height=0.27, label=label)
    ax.set_yticks(y, names)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("share")
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title("what each packer costs")
    return done(fig)
