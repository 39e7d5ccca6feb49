"""Decoding video frames by index with torchcodec or PyAV, exact or approximate (chapter 15).

Two decoders, one call: :func:`decode_clip` returns the frames at the asked indices as a
``uint8`` tensor ``(N, 3, H, W)``. ``torchcodec`` (the PyTorch team's decoder, over the
system's FFmpeg) seeks and decodes in C++; ``pyav`` is written out here in a few lines, so
the mechanism is visible: seek to the keyframe at or before the first wanted frame, then
decode forward, keeping the wanted frames. ``seek="approximate"`` with PyAV stops at the
keyframe instead of decoding forward: cheaper, and wrong, which the frame counter shows.
torchcodec's ``seek_mode="approximate"`` is a different thing: it skips the scan of the
whole file when the decoder opens and trusts the header, and still returns exact frames
for a constant-frame-rate file.

Every failure is a :class:`MediaError` naming the file, and the frame and its timestamp
when a frame cannot be decoded.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import torch

from ..errors import DataFormatError

BACKENDS = ("torchcodec", "pyav")
SEEKS = ("exact", "approximate")


class MediaError(DataFormatError):
    """A media file that cannot be opened or decoded; the message names it (chapter 15)."""


def _name(source) -> str:
    return f"<{len(source)} bytes in memory>" if isinstance(source, bytes | bytearray) \
        else str(source)


def _check_source(source) -> None:
    if isinstance(source, bytes | bytearray):
        if not source:
            raise MediaError("<0 bytes in memory>: empty, not a media file")
        return
    p = Path(source)
    if not p.is_file():
        raise MediaError(f"{p}: no such file")
    if p.stat().st_size == 0:
        raise MediaError(f"{p}: zero-length file, not a media file")


def _check(name: str, backend: str, seek: str) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, not {backend!r}")
    if seek not in SEEKS:
        raise ValueError(f"seek must be one of {SEEKS}, not {seek!r}")


def _why(e: BaseException) -> str:
    text = " ".join(str(e).split())
    # torchcodec prefixes its C++ source location: "Decoder, /path/File.cpp:52, message"
    text = re.sub(r"^\w+, \S+\.cpp:\d+, ", "", text)
    text = re.sub(r" \(\S+\.cpp:\d+\)", "", text)  # SPDL appends it
    return text[:240] or type(e).__name__


def video_decoder(source, *, seek: str = "exact", threads: int = 1, device: str = "cpu"):
    """A torchcodec ``VideoDecoder`` (NCHW uint8), its errors named for the file."""
    _check_source(source)
    from torchcodec.decoders import VideoDecoder

    src = bytes(source) if isinstance(source, bytearray) else \
        source if isinstance(source, bytes) else str(source)
    try:
        return VideoDecoder(src, seek_mode=seek, num_ffmpeg_threads=threads, device=device)
    except Exception as e:  # noqa: BLE001 - torchcodec raises RuntimeError/ValueError
        raise MediaError(f"{_name(source)}: cannot open as video ({_why(e)})") from None


def _open_av(source):
    import io

    import av

    _check_source(source)
    try:
        c = av.open(io.BytesIO(source) if isinstance(source, bytes | bytearray) else str(source))
    except Exception as e:  # noqa: BLE001 - av.error.InvalidDataError and friends
        raise MediaError(f"{_name(source)}: cannot open as media ({_why(e)})") from None
    if not c.streams.video:
        c.close()
        raise MediaError(f"{_name(source)}: no video stream")
    return c


def _frame_index(frame, stream) -> int:
    return int(round(float(frame.pts * stream.time_base) * float(stream.average_rate)))


def _pyav_frames(source, indices: list[int], seek: str, threads: int, size) -> list:
    """The mechanism by hand: seek to a keyframe, decode forward, keep the wanted frames."""
    wanted = sorted(set(indices))
    got: dict[int, np.ndarray] = {}
    with _open_av(source) as c:
        st = c.streams.video[0]
        st.thread_type = "AUTO" if threads != 1 else "SLICE"
        st.codec_context.thread_count = threads
        fps, tb = float(st.average_rate), st.time_base
        todo = list(wanted)
        kw = {"format": "rgb24"} | ({"width": size[1], "height": size[0]} if size else {})
        while todo:
            first = todo[0]
            ts = first / fps
            try:
                # backward=True: the keyframe at or before the timestamp
                c.seek(round(ts / tb), stream=st, backward=True, any_frame=False)
                for frame in c.decode(st):
                    i = _frame_index(frame, st)
                    if seek == "approximate":  # take what the seek landed on
                        i = todo[0]
                    if i in todo:
                        got[i] = frame.to_ndarray(**kw)
                        todo.remove(i)
                        if seek == "approximate" or not todo or todo[0] > i + 2 * fps:
                            break  # far ahead: seek again instead of decoding the gap
                    elif i > todo[0]:
                        raise MediaError(f"frame {todo[0]} was not found (got {i})")
                else:
                    raise MediaError(f"frame {todo[0]} is past the end of the stream")
            except MediaError as e:
                raise MediaError(f"{_name(source)}: {e} (at {todo[0] / fps:.3f} s)") from None
            except Exception as e:  # noqa: BLE001
                raise MediaError(f"{_name(source)}: cannot decode frame {todo[0]} "
                                 f"(at {todo[0] / fps:.3f} s): {_why(e)}") from None
    return [got[i] for i in indices]


def _cut(dec) -> str:
    """``"; the file is cut short ..."`` when the header promises more frames than are there."""
    m = dec.metadata
    head, there = getattr(m, "num_frames_from_header", None), m.num_frames
    if head and there and head > there:
        return f"; the file is cut short: its header promises {head} frames, {there} are there"
    return ""


def decode_clip(source, indices, backend: str = "torchcodec", *, seek: str = "exact",
                threads: int = 1, size: tuple[int, int] | None = None,
                decoder=None, device: str = "cpu") -> torch.Tensor:
    """The frames at ``indices`` of a video: ``uint8 (N, 3, H, W)``.

    Args:
        source: a video file (path) or its bytes (e.g. a tar shard member).
        indices: frame indices, e.g. from :func:`~labkit.clip_indices`.
        backend: ``torchcodec`` or ``pyav``.
        seek: ``exact`` or ``approximate`` (see the module doc: the two backends differ).
        threads: FFmpeg's decode threads (1: one core, the DataLoader-worker setting).
        size: ``(height, width)`` to scale to while converting (PyAV: swscale; torchcodec:
            a resize of the decoded tensor).
        decoder: an open torchcodec decoder to reuse (skips opening the file again).
        device: torchcodec only: ``"cuda"`` decodes with NVDEC (guard it with
            ``lk.status("media_gpu")``); the frames come back on that device.

    Raises:
        MediaError: the file is missing, empty, not media, or a frame cannot be decoded
            (the message names the file, the frame and its timestamp).
    """
    _check(_name(source), backend, seek)
    indices = [int(i) for i in indices]
    if backend == "pyav" and device != "cpu":
        raise ValueError("PyAV decodes on the CPU; device= is a torchcodec option")
    if backend == "pyav":
        frames = _pyav_frames(source, indices, seek, threads, size)
        return torch.from_numpy(np.stack(frames)).permute(0, 3, 1, 2).contiguous()
    dec = decoder or video_decoder(source, seek=seek, threads=threads, device=device)
    n = dec.metadata.num_frames
    bad = [i for i in indices if not 0 <= i < (n or 1 << 62)]
    if bad:
        raise MediaError(f"{_name(source)}: frame {bad[0]} is outside 0..{n - 1}{_cut(dec)}")
    try:
        data = dec.get_frames_at(indices).data
    except Exception as e:  # noqa: BLE001
        fps = dec.metadata.average_fps or 1
        raise MediaError(f"{_name(source)}: cannot decode frames {indices[0]}..{indices[-1]} "
                         f"(from {indices[0] / fps:.3f} s): {_why(e)}{_cut(dec)}") from None
    if size:
        data = torch.nn.functional.interpolate(data, size=size, mode="bilinear",
                                               antialias=True).round().clamp(0, 255)\
            .to(torch.uint8)
    return data


def decode_all(source, backend: str = "torchcodec", *, threads: int = 1,
               keyframes_only: bool = False, size: tuple[int, int] | None = None) -> int:
    """Decode every frame in order (to RGB) and return how many: the sequential rate's work.

    ``keyframes_only`` asks FFmpeg's decoder to skip every frame that is not a keyframe
    (``skip_frame="NONKEY"``, PyAV only): only keyframes are decoded, the cheapest way to
    look at a long video.
    """
    _check(_name(source), backend, "exact")
    if backend == "torchcodec":
        if keyframes_only:
            raise ValueError("keyframes_only is a PyAV option here (skip_frame=NONKEY)")
        dec = video_decoder(source, threads=threads)
        fps = dec.metadata.average_fps or 1
        try:
            for n in range(len(dec)):
                dec[n]
        except Exception as e:  # noqa: BLE001
            raise MediaError(f"{_name(source)}: cannot decode frame {n} (at {n / fps:.3f} s): "
                             f"{_why(e)}{_cut(dec)}") from None
        return len(dec)
    n = 0
    kw = {"format": "rgb24"} | ({"width": size[1], "height": size[0]} if size else {})
    with _open_av(source) as c:
        st = c.streams.video[0]
        st.thread_type = "AUTO" if threads != 1 else "SLICE"
        st.codec_context.thread_count = threads
        if keyframes_only:
            st.codec_context.skip_frame = "NONKEY"
        try:
            for frame in c.decode(st):
                frame.to_ndarray(**kw)
                n += 1
        except Exception as e:  # noqa: BLE001
            raise MediaError(f"{_name(source)}: cannot decode after frame {n} "
                             f"(at {n / float(st.average_rate):.3f} s): {_why(e)}") from None
    return n


def video_info(source) -> dict:
    """``{"frames", "fps", "width", "height", "keyframes"}`` from the packets (no decode)."""
    with _open_av(source) as c:
        st = c.streams.video[0]
        fps = float(st.average_rate)
        keys, n = [], 0
        for pkt in c.demux(st):
            if pkt.size == 0:
                continue
            if pkt.is_keyframe:
                keys.append(int(round(float(pkt.pts * st.time_base) * fps)))
            n += 1
        return {"frames": n, "fps": fps, "width": st.codec_context.width,
                "height": st.codec_context.height, "keyframes": sorted(keys)}
