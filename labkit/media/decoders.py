"""Every frame of a video decoded, and its packets counted: the video-decode ceiling (ch. 15).

Kept for :mod:`labkit.tools.ceilings_media` only (chapter 15 types its own decoders).
"""

from __future__ import annotations

from ..errors import DataFormatError


def decode_all(source, backend: str = "torchcodec", *, threads: int = 1) -> int:
    """Decode every frame in order (to RGB) with ``torchcodec`` or ``pyav``; how many."""
    try:
        if backend == "torchcodec":
            from torchcodec.decoders import VideoDecoder

            dec = VideoDecoder(str(source), num_ffmpeg_threads=threads)
            for n in range(len(dec)):
                dec[n]
            return len(dec)
        import av

        n = 0
        with av.open(str(source)) as c:
            st = c.streams.video[0]
            st.codec_context.thread_count = threads
            for frame in c.decode(st):
                frame.to_ndarray(format="rgb24")
                n += 1
        return n
    except Exception as e:  # noqa: BLE001 - FFmpeg's errors, named for the file
        raise DataFormatError(f"{source}: cannot decode as video ({e})") from None


def video_info(source) -> dict:
    """``{"frames", "fps", "width", "height", "keyframes"}`` from the packets (no decode)."""
    import av

    with av.open(str(source)) as c:
        st = c.streams.video[0]
        fps = float(st.average_rate)
        packets = [p for p in c.demux(st) if p.size]
        keys = sorted(round(float(p.pts * st.time_base) * fps) for p in packets if p.is_keyframe)
        return {"frames": len(packets), "fps": fps, "width": st.codec_context.width,
                "height": st.codec_context.height, "keyframes": keys}
