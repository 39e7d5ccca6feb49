"""labkit.media (chapter 15): the video and audio fixtures (a frame counter in every frame,
lossless audio), the decoder checks and what they say to install, the media benchmark.

torchcodec and SPDL need FFmpeg's shared libraries: without them these tests skip with what
to install, except under CI=true (CI installs FFmpeg), where they fail.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

import labkit as lk
from labkit import optional
from labkit.media.backends import FFMPEG_INSTALL, FFMPEG_VERSIONS
from labkit.media.writers import synth_audio, to_int16
from labkit_tools.bench import run_benchmark


def require_ffmpeg() -> None:
    ok, reason = lk.status("ffmpeg")
    if ok:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but FFmpeg cannot be used: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def videos(ci_fixture):
    require_ffmpeg()
    return ci_fixture("videos")


@pytest.fixture(scope="module")
def audio(ci_fixture):
    require_ffmpeg()
    return ci_fixture("audio")


def path_of(fx, video_id):
    return fx.path / fx.meta["videos"][video_id]["file"]


def first(fx, gop):
    return next(v for v in fx.meta["videos"] if v["gop"] == gop)


# -- fixtures -------------------------------------------------------------------------------------
# Chapter 15 types the clip plans, decoders, datasets and audio windows in its cells (their
# checked cells pin them, bad input included); these pin the fixtures the kit writes.

def read_counter(frame) -> int:
    """The frame index drawn in a decoded fixture frame (CHW uint8): chapter 15's reader."""
    grey = torch.as_tensor(frame).float().mean(0)
    ch, cw = grey.shape[0] // 8, grey.shape[1] // 8
    return sum(int(grey[r * ch + ch // 4:(r + 1) * ch - ch // 4,
                        c * cw + cw // 4:(c + 1) * cw - cw // 4].mean() > 128) << (8 * r + c)
               for r in range(2) for c in range(8))


def test_video_fixture_has_the_keyframe_intervals_it_says(videos):
    import av

    assert videos.samples == len(videos.meta["videos"]) == 6
    assert len(videos.file_list(".tar")) == 2 and len(videos.file_list(".mp4")) == 6
    for v in videos.meta["videos"]:
        with av.open(str(path_of(videos, v["id"]))) as c:
            st = c.streams.video[0]
            packets = [p for p in c.demux(st) if p.size]
            keys = [round(float(p.pts * st.time_base) * v["fps"]) for p in packets if p.is_keyframe]
        assert len(packets) == v["frames"] == 200
        assert sorted(keys) == list(range(0, 200, v["gop"])), v["file"]


def test_every_frame_carries_its_index(videos):
    from torchcodec.decoders import VideoDecoder

    v = first(videos, 25)
    frames = VideoDecoder(str(path_of(videos, v["id"]))).get_frames_in_range(0, v["frames"]).data
    assert isinstance(frames, torch.Tensor) and frames.shape[1:] == (3, 64, 64)
    assert [read_counter(f) for f in frames] == list(range(v["frames"]))


def test_counter_survives_a_reduced_decode_size(videos):
    import av

    with av.open(str(path_of(videos, first(videos, 25)["id"]))) as c:
        small = [torch.from_numpy(f.to_ndarray(format="rgb24", width=32, height=32))
                 .permute(2, 0, 1) for _, f in zip(range(40), c.decode(video=0), strict=False)]
    assert small[0].shape == (3, 32, 32)
    assert [read_counter(f) for f in small] == list(range(40))


def test_synth_frame_rejects_an_index_the_counter_cannot_hold():
    from labkit.media.writers import synth_frame

    with pytest.raises(ValueError, match="16-bit counter"):
        synth_frame(1 << 16, 64, 64)


def test_audio_fixture_decodes_to_the_stored_samples(audio):
    from torchcodec.decoders import AudioDecoder

    for f in audio.meta["files"]:
        ref = to_int16(synth_audio(f["kind"], f["sample_rate"], f["seconds"], f["seed"]))
        x = AudioDecoder(str(audio.path / f["file"])).get_samples_played_in_range(3.5, 5.5).data
        lo = round(3.5 * f["sample_rate"])
        assert x.shape == (1, 2 * f["sample_rate"]), f["file"]
        np.testing.assert_array_equal(x[0].numpy(),
                                      ref[lo:lo + x.shape[1]].astype(np.float32) / 32768)


# -- what runs here, and what to install where it does not ----------------------------------------

def test_without_ffmpeg_the_reason_says_what_to_install(monkeypatch):
    import importlib

    from labkit.media import backends

    real = importlib.import_module

    def no_libav(name, *a, **kw):  # what torchcodec raises where FFmpeg's libraries are missing
        if name == "torchcodec.decoders":
            raise RuntimeError("Could not load libtorchcodec. libavutil.so.59: cannot open "
                               "shared object file")
        return real(name, *a, **kw)

    backends._torchcodec_status.cache_clear()
    monkeypatch.setattr(optional.importlib, "import_module", no_libav)
    try:
        ok, reason = lk.status("ffmpeg")
        assert not ok and FFMPEG_INSTALL in reason and "apt-get install ffmpeg" in reason
        assert "torchcodec does not load here (RuntimeError: Could not load" in reason
    finally:
        backends._torchcodec_status.cache_clear()


def test_lab_prints_what_to_install_without_ffmpeg(monkeypatch, capsys):
    from labkit_tools import cli, commands

    # labkit lab prints each failing check of labkit doctor, FFmpeg's among them
    monkeypatch.setitem(optional._CHECKS, "ffmpeg", lambda: (False, "REASON: " + FFMPEG_INSTALL))
    monkeypatch.setattr(commands, "ensure_fixtures", lambda **kw: {})
    monkeypatch.setattr(os, "execv", lambda *a: None)  # do not start JupyterLab
    cli.main(["lab", "--scale", "ci"])
    out = capsys.readouterr().out
    assert "FFmpeg libs" in out and "REASON: install FFmpeg" in out
    assert f"chapter 15 needs FFmpeg's shared libraries ({FFMPEG_VERSIONS}): apt-get install " \
        "ffmpeg" in out


def test_probes_say_what_runs_here():
    for name in ("ffmpeg", "torchcodec", "pyav", "spdl", "media_gpu"):
        ok, reason = lk.status(name)
        assert isinstance(ok, bool) and reason


def test_media_benchmark_is_registered():
    from labkit_tools.bench import BENCHMARKS

    assert "media" in BENCHMARKS and "16-frame clips" in BENCHMARKS["media"].goal


def test_media_benchmark_runs_tiny(videos):
    """CI does not run the benchmarks (`make bench` does): this keeps this one working."""
    r = run_benchmark("media", scale="ci", num_workers=2, clips=32, rounds=2)
    assert r["workers_clips_per_s"] > 0 and r["single_core_clips_per_s"] > 0
    assert r["keyframe_interval_far"] > r["keyframe_interval_near"]
    assert {"clip_cost_ratio_far_over_near", "verdict", "goal_met"} <= set(r)
    assert lk.worker_processes() == []


@pytest.mark.gpu(probe="media_gpu")  # skipped, with the reason, where it cannot run
def test_gpu_clip_decode_returns_the_right_frames(videos):
    from torchcodec.decoders import VideoDecoder

    clip = list(range(30, 46, 2))
    dec = VideoDecoder(str(path_of(videos, first(videos, 25)["id"])), device="cuda")
    frames = dec.get_frames_at(clip).data
    assert frames.is_cuda and [read_counter(f) for f in frames.cpu()] == clip


class _Item:
    def __init__(self, path):
        self.path, self.nodeid, self.markers = path, f"notebooks/{path.name}::Cell 0", []

    def get_closest_marker(self, name):
        return None

    def add_marker(self, marker):
        self.markers.append(marker)


def test_chapter_15_skips_without_ffmpeg_but_not_under_ci(monkeypatch, tmp_path, pytestconfig):
    # tests/conftest.py as pytest loaded it (``import conftest`` may find notebooks' one)
    mine = Path(__file__).with_name("conftest.py")
    conftest = next(p for p in pytestconfig.pluginmanager.get_plugins()
                    if Path(getattr(p, "__file__", None) or "/").resolve() == mine.resolve())

    monkeypatch.setitem(optional._CHECKS, "ffmpeg", lambda: (False, "no FFmpeg: apt-get ..."))
    items = [_Item(tmp_path / "15_video_and_audio.ipynb"), _Item(tmp_path / "01_x.ipynb")]
    monkeypatch.delenv("CI", raising=False)
    conftest.pytest_collection_modifyitems(None, None, items)
    assert [m.kwargs["reason"] for m in items[0].markers] == ["no FFmpeg: apt-get ..."]
    assert items[1].markers == []
    items[0].markers.clear()
    monkeypatch.setenv("CI", "true")  # CI installs FFmpeg: there the chapter runs and fails
    conftest.pytest_collection_modifyitems(None, None, items)
    assert items[0].markers == []


def _cuda_machine(monkeypatch, probe_says):
    """A CUDA machine as media_gpu sees it: CUDA torch and device, torchcodec loading; the
    test decode on the GPU answers ``probe_says`` (None: it worked)."""
    import torch

    from labkit.media import backends

    monkeypatch.setitem(optional._CHECKS, "cuda",
                        lambda device=None: (True, "CUDA 12.6: NVIDIA H100 80GB HBM3"))
    monkeypatch.setattr(torch.version, "cuda", "12.6")
    monkeypatch.setattr(backends, "_torchcodec_status", lambda: (True, "torchcodec 0.13.0"))
    monkeypatch.setattr(backends, "_cuda_decode_probe", lambda device: probe_says)


def test_media_gpu_fails_with_the_cpu_torchcodec_and_says_what_to_install(monkeypatch):
    """Review 15-1: CUDA torch and a GPU are not enough; the CPU torchcodec (0.13.0, what the
    kit installs beside a CUDA 12 torch) cannot decode on the GPU, so the check must fail and
    name the CUDA build."""
    _cuda_machine(monkeypatch, "RuntimeError: Unsupported device: cuda (device type: cuda, "
                               "variant: default)")
    ok, reason = lk.status("media_gpu")
    assert not ok
    assert "Unsupported device: cuda" in reason
    assert "pip install torchcodec --index-url https://download.pytorch.org/whl/cu126" in reason


def test_media_gpu_passes_when_the_test_decode_runs_on_the_gpu(monkeypatch):
    _cuda_machine(monkeypatch, None)
    ok, reason = lk.status("media_gpu")
    assert ok and "a test decode on the GPU ran" in reason


def test_the_cuda_probe_refuses_with_a_cpu_torchcodec():
    """The real probe, where torchcodec is the CPU build (the kit's pin): it says why."""
    from labkit.media.backends import _cuda_decode_probe

    if not lk.status("torchcodec")[0]:
        pytest.skip("needs torchcodec with FFmpeg's libraries")
    import torchcodec

    if "+cpu" not in torchcodec.__version__:  # the wheel's own version says which build
        pytest.skip("needs the CPU build of torchcodec with FFmpeg's libraries")
    said = _cuda_decode_probe("cuda")
    assert said and "cuda" in said


def test_the_cuda_probe_fails_when_torchcodec_fell_back_to_the_cpu(monkeypatch):
    """Review 15-F1: a CUDA torchcodec without NVDEC (no libnvcuvid.so), or given a stream
    NVDEC cannot take, decodes on the CPU and still returns a CUDA tensor; only the
    decoder's ``cpu_fallback`` tells. The probe's clip is real (H.264, encoded here); the
    decoder is a stand-in that answers as such a machine would."""
    if not lk.status("torchcodec")[0]:
        pytest.skip("needs torchcodec with FFmpeg's libraries")
    import torchcodec.decoders

    from labkit.media.backends import _cuda_decode_probe

    class Frame:
        is_cuda, device = True, "cuda:0"

    class Fallback:
        fell_back = True

        def __bool__(self):
            return self.fell_back

        def __str__(self):
            return "[CUDA] Fallback status: Falling back due to: NVCUVID not available"

    seen = []

    class Decoder:
        def __init__(self, source, device=None):
            seen.append(bytes(source.numpy()))
            self.cpu_fallback = Fallback()

        def __getitem__(self, index):
            return Frame()

    monkeypatch.setattr(torchcodec.decoders, "VideoDecoder", Decoder)
    said = _cuda_decode_probe.__wrapped__("cuda")  # uncached: this test's stand-in
    if said and said.startswith("cannot make the probe's H.264 test clip"):
        pytest.skip(f"this FFmpeg has no H.264 encoder: {said}")
    assert said and "fell back to CPU decoding" in said and "NVCUVID" in said
    assert b"avc1" in seen[0]  # the clip is H.264 (its mp4 sample entry), not MPEG-4 Part 2
    Fallback.fell_back = False  # NVDEC decoded it: the probe passes
    assert _cuda_decode_probe.__wrapped__("cuda") is None
