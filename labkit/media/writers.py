"""The media fixtures' writers: H.264 videos and audio files, plus WebDataset shards (ch. 15).

PyAV's wheels carry FFmpeg with libx264, so the bytes are the same for the same PyAV build.
Every file is also packed into tar shards (the file and a ``.json`` per sample).
"""

from __future__ import annotations

import json
import tarfile
import wave
from fractions import Fraction
from pathlib import Path

import numpy as np

from ..data.writers import Writer, shard_bounds, tar_add

# Each frame carries its index as a 16-bit counter, a 2 x 8 grid of cells in its top quarter
# that chapter 15 reads back: large and far from mid-grey, they survive H.264 and resizing.
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
    ch, cw = max(1, height // 8), max(1, width // 8)
    for b in range(BITS):  # the counter: bit b is cell (b // 8, b % 8)
        r, c = divmod(b, 8)
        frame[r * ch:(r + 1) * ch, c * cw:(c + 1) * cw] = _HIGH if (i >> b) & 1 else _LOW
    return frame


def encode_video(path_or_file, frames: int, width: int, height: int, fps: int, gop: int,
                 seed: int = 0, crf: int = 20) -> None:
    """Write ``frames`` synthetic frames as H.264 (yuv420p) in mp4, a keyframe every ``gop``.

    ``scenecut=0`` and ``min-keyint=gop``: no keyframes but the chapter's. ``mbtree=0``: with
    x264's macroblock-tree rate control, the same frames gave other bytes in about one process
    in three (it reads memory whose contents depend on the process); without, 20 of 20 matched
    (issue 22).
    """
    import av

    # faststart: the index (moov) goes first, as for streaming; a cut file then still opens
    # and fails at the first missing frame, which the error can name
    with av.open(path_or_file, "w", format="mp4", options={"movflags": "+faststart"}) as out:
        st = out.add_stream("libx264", rate=fps)
        st.width, st.height, st.pix_fmt = width, height, "yuv420p"
        st.codec_context.gop_size = gop
        st.options = {"crf": str(crf), "preset": "fast", "threads": "1",
                      "x264-params": f"keyint={gop}:min-keyint={gop}:scenecut=0:mbtree=0"}
        tb = Fraction(1, fps)
        for i in range(frames):
            vf = av.VideoFrame.from_ndarray(synth_frame(i, height, width, seed), format="rgb24")
            vf.pts, vf.time_base = i, tb
            for pkt in st.encode(vf):
                out.mux(pkt)
        for pkt in st.encode():
            out.mux(pkt)


def _write_shards(dest: Path, prefix: str, items: list[dict], shards: int, ext: str) -> None:
    """One tar member pair per item: ``{id:06d}.{ext}`` (the file's bytes) and ``.json``."""
    (dest / "shards").mkdir()
    bounds = shard_bounds(len(items), shards)
    for s in range(shards):
        path = dest / "shards" / f"{prefix}-{s:06d}.tar"
        with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:
            for item in items[bounds[s]:bounds[s + 1]]:
                key = f"{item['id']:06d}"
                tar_add(tar, f"{key}.{ext}", (dest / item["file"]).read_bytes(), owner="")
                tar_add(tar, f"{key}.json", json.dumps(item, sort_keys=True).encode(), owner="")


class VideoWriter(Writer):
    """Videos at each keyframe interval x resolution x copy, as files and as shards."""

    required = ("seed", "fps", "seconds", "gops", "sizes", "copies", "shards")

    def estimate_bytes(self, spec):
        frames = spec["fps"] * spec["seconds"]
        px = sum(w * h for w, h in spec["sizes"])
        return 2 * frames * px * len(spec["gops"]) * spec["copies"] // 20

    def write(self, spec, dest, update):
        frames = int(spec["fps"] * spec["seconds"])
        (dest / "videos").mkdir()
        items = []
        for gop in spec["gops"]:
            for w, h in spec["sizes"]:
                for c in range(spec["copies"]):
                    rel = f"videos/gop{gop:03d}_{w}x{h}_{c}.mp4"
                    seed = spec["seed"] * 1000 + len(items)
                    encode_video(str(dest / rel), frames, w, h, spec["fps"], gop, seed)
                    update((dest / rel).stat().st_size)
                    items.append({"id": len(items), "file": rel, "gop": gop, "width": w,
                                  "height": h, "frames": frames, "fps": spec["fps"]})
        _write_shards(dest, "videos", items, spec["shards"], "mp4")
        return {"videos": items, "fps": spec["fps"], "frames": frames,
                "gops": spec["gops"], "sizes": spec["sizes"]}, len(items)


def synth_audio(kind: str, sample_rate: int, seconds: float, seed: int) -> np.ndarray:
    """A mono float32 waveform in [-1, 1]: ``tone``, ``noise`` or ``bursts`` (speech-like)."""
    n = int(round(sample_rate * seconds))
    t = np.arange(n) / sample_rate
    rng = np.random.default_rng(seed)
    if kind == "tone":
        step = (t.astype(np.int64) % 5)  # the pitch changes each second: windows differ
        f0 = 220.0 * 2 ** (step / 12)
        x = 0.4 * np.sin(2 * np.pi * f0 * t) + 0.2 * np.sin(2 * np.pi * 2.5 * f0 * t)
    elif kind == "noise":
        x = 0.3 * rng.standard_normal(n)
    elif kind == "bursts":
        syllables = np.maximum(0, np.sin(2 * np.pi * 4.0 * t + rng.uniform(0, 6)))
        gate = (rng.random(int(seconds) + 1) > 0.3)[t.astype(np.int64)]
        voice = np.sin(2 * np.pi * 140 * t) + 0.5 * np.sin(2 * np.pi * 700 * t)
        x = 0.5 * syllables * gate * (0.7 * voice + 0.3 * rng.standard_normal(n))
    else:
        raise ValueError(f"audio kind {kind!r}: use tone, noise or bursts")
    return np.clip(x, -1, 1).astype(np.float32)


def to_int16(x: np.ndarray) -> np.ndarray:
    return np.round(x * 32767).astype(np.int16)


def write_wav(path, x: np.ndarray, sample_rate: int) -> None:
    """16-bit PCM mono WAV with the standard library (no encoder, the same bytes anywhere)."""
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sample_rate)
        w.writeframes(to_int16(x).tobytes())


def write_flac(path, x: np.ndarray, sample_rate: int) -> None:
    """Lossless FLAC with PyAV: decoding gives back exactly the 16-bit samples."""
    import av

    pcm = to_int16(x)
    with av.open(str(path), "w", format="flac") as out:
        st = out.add_stream("flac", rate=sample_rate, layout="mono")
        st.format = "s16"
        step = 4096
        for lo in range(0, len(pcm), step):
            af = av.AudioFrame.from_ndarray(pcm[None, lo:lo + step], format="s16", layout="mono")
            af.sample_rate, af.pts, af.time_base = sample_rate, lo, Fraction(1, sample_rate)
            for pkt in st.encode(af):
                out.mux(pkt)
        for pkt in st.encode():
            out.mux(pkt)


class AudioWriter(Writer):
    """Tones, noise and bursts at each sample rate, as WAV and FLAC files and as shards."""

    required = ("seed", "sample_rates", "seconds", "kinds", "shards")

    def estimate_bytes(self, spec):
        return 4 * sum(spec["sample_rates"]) * spec["seconds"] * len(spec["kinds"])

    def write(self, spec, dest, update):
        (dest / "audio").mkdir()
        items = []
        for sr in spec["sample_rates"]:
            for kind in spec["kinds"]:
                seed = spec["seed"] * 1000 + len(items)
                x = synth_audio(kind, sr, spec["seconds"], seed)
                for ext, write in (("flac", write_flac), ("wav", write_wav)):
                    rel = f"audio/{kind}_{sr}.{ext}"
                    write(dest / rel, x, sr)
                    update((dest / rel).stat().st_size)
                    items.append({"id": len(items), "file": rel, "kind": kind,
                                  "sample_rate": sr, "samples": len(x),
                                  "seconds": spec["seconds"], "format": ext, "seed": seed})
        flac = [i for i in items if i["format"] == "flac"]
        _write_shards(dest, "audio", flac, spec["shards"], "flac")
        return {"files": items, "seconds": spec["seconds"],
                "sample_rates": spec["sample_rates"]}, len(items)
