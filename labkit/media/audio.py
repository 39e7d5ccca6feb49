"""Audio windows: decode a time range of a long file, resampled, with torchcodec or PyAV (ch. 15).

Speech and audio models train on crops (e.g. 2 s) of long recordings. Decoding only the
crop means seeking to it and decoding a little around it; resampling to the model's rate
costs extra. :func:`audio_window` returns ``float32 (channels, samples)`` in [-1, 1].
A WAV file's header is checked with the standard library first, so a wrong header is named
as such instead of being decoded as noise.
"""

from __future__ import annotations

import wave
from pathlib import Path

import numpy as np
import torch

from .decoders import BACKENDS, MediaError, _check_source, _name, _why


def _check_wav(path: Path) -> None:
    try:
        with wave.open(str(path), "rb") as w:
            frames, width, channels = w.getnframes(), w.getsampwidth(), w.getnchannels()
            rate = w.getframerate()
    except (wave.Error, EOFError) as e:
        raise MediaError(f"{path}: not a valid WAV header ({e})") from None
    if not 1 <= channels <= 8 or width not in (1, 2, 3, 4) or not 1000 <= rate <= 768000:
        raise MediaError(f"{path}: implausible WAV header ({channels} channels, "
                         f"{8 * width}-bit, {rate} Hz)")
    need = 44 + frames * width * channels
    have = path.stat().st_size
    if have < need - 64:  # allow extra chunks before the data, not missing data
        raise MediaError(f"{path}: the WAV header promises {frames} frames "
                         f"({need} bytes), the file has {have}: truncated")


def audio_info(source) -> dict:
    """``{"sample_rate", "channels", "seconds"}`` of an audio file (header only)."""
    import av

    _check_source(source)
    if str(source).endswith(".wav"):
        _check_wav(Path(source))
    try:
        with av.open(str(source)) as c:
            if not c.streams.audio:
                raise MediaError(f"{source}: no audio stream")
            st = c.streams.audio[0]
            seconds = float(st.duration * st.time_base) if st.duration else \
                c.duration / 1e6
            return {"sample_rate": st.rate, "channels": st.channels, "seconds": seconds}
    except MediaError:
        raise
    except Exception as e:  # noqa: BLE001
        raise MediaError(f"{_name(source)}: cannot open as audio ({_why(e)})") from None


def _pyav_window(source, start_s: float, seconds: float, sample_rate) -> np.ndarray:
    """By hand: seek, decode, resample to float mono, cut the window out."""
    import av

    with av.open(str(source)) as c:
        if not c.streams.audio:
            raise MediaError(f"{source}: no audio stream")
        st = c.streams.audio[0]
        rate = sample_rate or st.rate
        res = av.AudioResampler(format="flt", layout="mono", rate=rate)
        c.seek(round(start_s / st.time_base), stream=st, backward=True)
        need = int(round(seconds * rate))
        parts, t0, have = [], None, 0
        for frame in c.decode(st):
            if t0 is None:
                t0 = float(frame.pts * st.time_base)
            for out in res.resample(frame):
                parts.append(out.to_ndarray().reshape(-1))
                have += parts[-1].size
            if have >= need + int((start_s - t0) * rate) + 1:
                break
        for out in res.resample(None):
            parts.append(out.to_ndarray().reshape(-1))
        if t0 is None:
            raise MediaError(f"{source}: no audio at {start_s:.3f} s")
        x = np.concatenate(parts)
        lo = int(round((start_s - t0) * rate))
        return x[None, lo:lo + need]


def audio_window(source, start_s: float, seconds: float, *, sample_rate: int | None = None,
                 backend: str = "torchcodec") -> torch.Tensor:
    """``seconds`` of audio from ``start_s``, as float32 ``(channels, samples)``.

    Args:
        sample_rate: resample to this rate (None: the file's own).
        backend: ``torchcodec`` (``AudioDecoder.get_samples_played_in_range``) or ``pyav``
            (seek, decode, ``av.AudioResampler``, by hand; mono).

    Raises:
        MediaError: missing, empty, not audio, a wrong WAV header, or a window past the end
            (the message names the file and the time).
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, not {backend!r}")
    _check_source(source)
    if str(source).endswith(".wav"):
        _check_wav(Path(source))
    if start_s < 0 or seconds <= 0:
        raise ValueError(f"a window needs start_s >= 0 and seconds > 0 ({start_s}, {seconds})")
    try:
        if backend == "pyav":
            x = torch.from_numpy(np.ascontiguousarray(
                _pyav_window(source, start_s, seconds, sample_rate)))
        else:
            from torchcodec.decoders import AudioDecoder

            dec = AudioDecoder(str(source), sample_rate=sample_rate)
            x = dec.get_samples_played_in_range(start_s, start_s + seconds).data
    except MediaError:
        raise
    except Exception as e:  # noqa: BLE001
        raise MediaError(f"{_name(source)}: cannot decode audio at {start_s:.3f} s "
                         f"({_why(e)})") from None
    want = int(round(seconds * (sample_rate or audio_info(source)["sample_rate"])))
    if x.shape[-1] < want - 1:
        raise MediaError(f"{source}: the window {start_s:.3f}-{start_s + seconds:.3f} s "
                         f"runs past the end ({x.shape[-1]} of {want} samples)")
    return x[..., :want]


def audio_starts(seconds_total: float, n: int, seconds: float, seed: int = 0) -> list[float]:
    """``n`` random window starts (s) that fit a file ``seconds_total`` long."""
    rng = np.random.default_rng(seed)
    return [round(float(s), 3) for s in rng.uniform(0, seconds_total - seconds, n)]
