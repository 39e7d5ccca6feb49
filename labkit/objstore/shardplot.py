"""The shard-size plot: measured bytes/s against the efficiency model (chapter 14)."""

from __future__ import annotations

import numpy as np

from ..display.figures import done, subplots
from .s3shards import shard_efficiency


def plot_shard_sizes(shard_bytes: dict, measured_bytes_per_s: dict, latency_s: float,
                     bytes_per_s: float, title: str | None = None):
    """Efficiency (share of one link's bandwidth) per shard size: measured points, model curve.

    Args:
        shard_bytes: label -> mean shard bytes.
        measured_bytes_per_s: label -> bytes/s read one GET at a time.
        latency_s, bytes_per_s: the store's first-byte latency and per-connection bandwidth.
    """
    sizes = np.array([shard_bytes[k] for k in shard_bytes], dtype=float)
    grid = np.geomspace(min(sizes.min(), 64e3) / 2, max(sizes.max(), 256e6) * 2, 200)
    fig, ax = subplots(figsize=(7, 3.6))
    ax.plot(grid / 1e6, shard_efficiency(grid, latency_s, bytes_per_s), color="0.5",
            label=f"model: transfer / (latency + transfer), {latency_s * 1e3:g} ms, "
                  f"{bytes_per_s / 1e6:g} MB/s")
    ax.plot(sizes / 1e6, [measured_bytes_per_s[k] / bytes_per_s for k in shard_bytes], "o-",
            label="measured (one GET at a time)")
    ax.axvspan(64, 256, color="tab:green", alpha=0.12, label="the field's 64-256 MB")
    ax.set_xscale("log")
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("shard size (MB)")
    ax.set_ylabel("efficiency")
    ax.set_title(title or "shard size against first-byte latency")
    ax.legend(fontsize=8, loc="lower right")
    return done(fig)
