"""Synthetic video frames with their own index drawn in, and reading it back (chapter 15).

Each frame carries a 16-bit frame counter as a 2 x 8 grid of black/white cells in its top
quarter, so a decoded frame proves which frame it is: the clip checks of chapter 15 read the
counter from the pixels instead of trusting the decoder's timestamps. The cells are large
(1/8 of the width each) and far from mid-grey, so they survive H.264, a reduced decode
resolution and colour conversion. Below them, stripes and a square move with the frame
index: content the encoder has to predict, as in a real video.
"""

from __future__ import annotations

import numpy as np

BITS = 16
_LOW, _HIGH = 24, 232  # far from the 128 threshold, inside YUV's limited range


def synth_frame(i: int, height: int, width: int, seed: int = 0) -> np.ndarray:
    """Frame ``i`` of a synthetic video: uint8 ``(height, width, 3)``, counter drawn in."""
    if i < 0 or i >= 1 << BITS:
        raise ValueError(f"frame index {i} does not fit the {BITS}-bit counter")
    y, x = np.mgrid[0:height, 0:width]
    stripes = ((x + y + 2 * i + seed) // 6) % 2
    frame = np.empty((height, width, 3), np.uint8)
    frame[..., 0] = 60 + 120 * stripes
    frame[..., 1] = (40 + (x * 3 + i * 5 + seed * 17) % 160).astype(np.uint8)
    frame[..., 2] = (200 - (y * 2 + i * 3) % 140).astype(np.uint8)
    side = max(4, min(height, width) // 5)  # a square crossing the lower part
    top = height // 4 + (i * 2) % max(1, height - height // 4 - side)
    left = (i * 3 + seed * 7) % max(1, width - side)
    frame[top:top + side, left:left + side] = (250, 250, 40)
    draw_counter(frame, i)
    return frame


def _cells(height: int, width: int):
    ch, cw = max(1, height // 8), max(1, width // 8)
    for b in range(BITS):
        r, c = divmod(b, 8)
        yield b, slice(r * ch, (r + 1) * ch), slice(c * cw, (c + 1) * cw)


def draw_counter(frame: np.ndarray, i: int) -> None:
    """Draw ``i`` into ``frame`` (HWC uint8, in place): bit b is cell (b // 8, b % 8)."""
    h, w = frame.shape[:2]
    for b, rows, cols in _cells(h, w):
        frame[rows, cols] = _HIGH if (i >> b) & 1 else _LOW


def read_counter(frame) -> int:
    """The frame index drawn in a decoded frame: HWC or CHW, uint8, numpy or torch.

    Each cell's centre (its middle half, away from edges the encoder blurs) is averaged
    over channels and compared with mid-grey.
    """
    a = frame.numpy() if hasattr(frame, "numpy") else np.asarray(frame)
    if a.ndim == 3 and a.shape[0] in (1, 3) and a.shape[-1] not in (1, 3):
        a = a.transpose(1, 2, 0)  # CHW (torchcodec) -> HWC
    h, w = a.shape[:2]
    value = 0
    for b, rows, cols in _cells(h, w):
        cell = a[rows, cols]
        ch, cw = cell.shape[:2]
        centre = cell[ch // 4: ch - ch // 4 or None, cw // 4: cw - cw // 4 or None]
        if float(centre.mean()) > 128:
            value |= 1 << b
    return value


def read_counters(frames) -> list[int]:
    """:func:`read_counter` of every frame in a clip (``N x C x H x W`` or ``N x H x W x C``)."""
    return [read_counter(f) for f in frames]
