"""labkit.media (chapter 15): fixtures with frame counters, clip decode by both decoders,
audio windows, clip datasets audited in workers, SPDL failures counted, bad input named.

torchcodec and SPDL need FFmpeg's shared libraries: without them these tests skip with what
to install, except under CI=true (CI installs FFmpeg), where they fail.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from torch.utils.data import DataLoader

import labkit as lk
from labkit import optional
from labkit.media.backends import FFMPEG_INSTALL, FFMPEG_VERSIONS
from labkit.media.writers import synth_audio, to_int16


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

def test_video_fixture_has_the_keyframe_intervals_it_says(videos):
    assert videos.samples == len(videos.meta["videos"]) == 6
    assert len(videos.file_list(".tar")) == 2 and len(videos.file_list(".mp4")) == 6
    for v in videos.meta["videos"]:
        info = lk.media.video_info(path_of(videos, v["id"]))
        assert info["frames"] == v["frames"] == 200
        assert info["keyframes"] == list(range(0, 200, v["gop"])), v["file"]


def test_every_frame_carries_its_index(videos):
    import torch

    v = first(videos, 25)
    dec = lk.media.decoders.video_decoder(path_of(videos, v["id"]))
    frames = dec.get_frames_in_range(0, v["frames"]).data
    assert isinstance(frames, torch.Tensor) and frames.shape[1:] == (3, 64, 64)
    assert [lk.media.read_counter(f) for f in frames] == list(range(v["frames"]))


def test_counter_survives_a_reduced_decode_size(videos):
    v = first(videos, 25)
    clip = lk.media.clip_indices(40, 8, 3)
    small = lk.media.decode_clip(path_of(videos, v["id"]), clip, "pyav", size=(32, 32))
    assert small.shape == (8, 3, 32, 32)
    assert lk.media.check_clip(small, clip).ok


def test_synth_frame_rejects_an_index_the_counter_cannot_hold():
    from labkit.media.frames import synth_frame

    with pytest.raises(ValueError, match="16-bit counter"):
        synth_frame(1 << 16, 64, 64)


# -- clips ----------------------------------------------------------------------------------------

def test_random_clips_are_a_pure_function_of_the_seed(videos):
    vs = videos.meta["videos"]
    a = lk.media.random_clips(vs, 3, 16, 2, seed=5)
    same = lk.media.random_clips(vs, 3, 16, 2, seed=5)
    other = lk.media.random_clips(vs, 3, 16, 2, seed=6)
    assert a == same != other
    assert [c.id for c in a] == list(range(18))
    assert all(c.indices[-1] < 200 and len(c.indices) == 16 for c in a)
    with pytest.raises(ValueError, match="a clip needs 399"):
        lk.media.random_clips(vs, 1, 200, 2)


@pytest.mark.parametrize("backend", ["torchcodec", "pyav"])
@pytest.mark.parametrize("seek", ["exact", "approximate"])
def test_exact_frames_from_both_decoders(videos, backend, seek):
    for gop in (1, 25, 250):
        v = first(videos, gop)
        for c in lk.media.random_clips([v], 2, 16, 2, seed=1):
            frames = lk.media.decode_clip(path_of(videos, v["id"]), c.indices, backend, seek=seek)
            check = lk.media.check_clip(frames, c.indices)
            if backend == "pyav" and seek == "approximate" and gop > 1:
                assert not check.ok and 0 < check.off_by < gop  # the keyframe, not the frame
                assert "WRONG FRAMES" in str(check)
            else:
                assert check.ok, (gop, str(check))


def test_decode_clip_from_bytes_and_unsorted_indices(videos):
    data = path_of(videos, first(videos, 25)["id"]).read_bytes()
    idx = [90, 10, 55, 10]
    for backend in ("torchcodec", "pyav"):
        assert lk.media.check_clip(lk.media.decode_clip(data, idx, backend), idx).ok


def test_keyframes_only_decodes_the_keyframes(videos):
    path = path_of(videos, first(videos, 25)["id"])
    assert lk.media.decode_all(path, "pyav") == lk.media.decode_all(path, "torchcodec") == 200
    assert lk.media.decode_all(path, "pyav", keyframes_only=True) == 8


# -- audio ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", ["torchcodec", "pyav"])
def test_audio_windows_are_the_stored_samples(audio, backend):
    for f in audio.meta["files"]:
        ref = to_int16(synth_audio(f["kind"], f["sample_rate"], f["seconds"], f["seed"]))
        for start in (0.0, 3.5, f["seconds"] - 2.0):
            x = lk.media.audio_window(audio.path / f["file"], start, 2.0, backend=backend)
            lo = round(start * f["sample_rate"])
            assert x.shape == (1, 2 * f["sample_rate"]), f["file"]
            np.testing.assert_array_equal(x[0].numpy(),
                                          ref[lo:lo + x.shape[1]].astype(np.float32) / 32768)


@pytest.mark.parametrize("backend", ["torchcodec", "pyav"])
def test_audio_resampled_window(audio, backend):
    f = next(f for f in audio.meta["files"] if f["sample_rate"] == 44100 and f["kind"] == "tone")
    x = lk.media.audio_window(audio.path / f["file"], 5.0, 2.0, sample_rate=16000, backend=backend)
    assert x.shape == (1, 32000) and float(x.abs().max()) <= 1.0
    # a stepping chord: the resampled window keeps the tone's energy
    assert 0.1 < float(x.pow(2).mean().sqrt()) < 0.5


def test_audio_window_past_the_end_names_the_file_and_time(audio):
    f = audio.meta["files"][0]
    with pytest.raises(lk.media.MediaError, match=rf"{f['file']}.*19\.000-21\.000 s runs past"):
        lk.media.audio_window(audio.path / f["file"], 19.0, 2.0)


def test_audio_windows_in_workers_exactly_once(audio):
    flacs = [audio.path / f["file"] for f in audio.meta["files"] if f["format"] == "flac"]
    starts = lk.media.audio_starts(audio.meta["seconds"], 10, 1.0, seed=0)
    ds = lk.media.AudioWindows(flacs, [(i % len(flacs), s) for i, s in enumerate(starts)], 1.0,
                         sample_rate=16000)
    seen = []
    for batch in DataLoader(ds, batch_size=3, num_workers=2, timeout=60):
        assert batch["audio"].shape[1:] == (1, 16000)
        seen += list(zip(batch["worker"], batch["id"].tolist(), strict=True))
    lk.audit(seen, len(ds)).check()


# -- datasets in workers --------------------------------------------------------------------------

def _audited(loader, expected):
    seen, wrong = [], 0
    for batch in loader:
        seen += list(zip(batch["worker"], batch["id"].tolist(), strict=True))
        wrong += sum(not lk.media.check_clip(f, i).ok
                     for f, i in zip(batch["frames"], batch["indices"].tolist(), strict=True))
    return lk.audit(seen, expected), wrong


@pytest.mark.parametrize("backend", ["torchcodec", "pyav"])
def test_clip_dataset_in_workers_exactly_once_and_right(videos, backend):
    plan = lk.media.random_clips(videos.meta["videos"], 2, 8, 2, seed=3)
    ds = lk.media.ClipDataset(videos, plan, backend=backend)
    ds[0]  # a decoder opened here, before the fork, must not be shared with the workers
    result, wrong = _audited(DataLoader(ds, batch_size=3, num_workers=2, timeout=60),
                             len(plan))
    result.check()
    assert wrong == 0 and set(result.per_source) == {"worker0", "worker1"}


def test_clip_shard_stream_matches_the_file_plan(videos):
    stream = lk.media.ClipShardStream(videos, clips_per_video=2, frames=8, stride=2, seed=3)
    result, wrong = _audited(DataLoader(stream, batch_size=4, num_workers=2, timeout=60), 12)
    result.check()
    assert wrong == 0 and set(result.per_source) == {"worker0", "worker1"}
    # the same seed draws the same clips as random_clips over the files
    plan = lk.media.random_clips(videos.meta["videos"], 2, 8, 2, seed=3)
    got = {int(s["id"]): tuple(s["indices"].tolist()) for s in iter(stream)}
    assert got == {c.id: c.indices for c in plan}


# -- SPDL -----------------------------------------------------------------------------------------

@pytest.fixture
def spdl_jobs(videos, tmp_path):
    ok, reason = lk.status("spdl")
    if not ok:
        pytest.skip(reason)
    plan = lk.media.random_clips(videos.meta["videos"], 1, 8, 2, seed=4)
    jobs = [(c, path_of(videos, c.video)) for c in plan]
    bad = tmp_path / "not_a_video.mp4"
    bad.write_bytes(b"not a video " * 50)
    return jobs, [jobs[0], (jobs[1][0], bad), *jobs[2:]], bad


def test_spdl_as_it_comes_loses_a_failure_silently(spdl_jobs):
    _, broken, _ = spdl_jobs
    run = lk.media.spdl_clips(broken, counted=False)
    assert (run.asked, len(run.delivered), run.lost, run.failures) == (6, 5, 1, [])
    assert run.logged >= 1  # the only trace: SPDL's log


def test_spdl_max_failures_zero_halts(spdl_jobs):
    _, broken, _ = spdl_jobs
    with pytest.raises(Exception):  # noqa: B017 - SPDL's PipelineFailure, not labkit's
        lk.media.spdl_clips(broken, counted=False, max_failures=0)


def test_spdl_failures_are_counted_and_raised(spdl_jobs):
    jobs, broken, bad = spdl_jobs
    with pytest.raises(lk.media.MediaError, match=rf"(?s)1 of 6 clips failed.*{bad}"):
        lk.media.spdl_clips(broken)
    run = lk.media.spdl_clips(broken, skip_errors=True)
    assert run.lost == len(run.failures) == 1 and str(bad) in run.failures[0]
    ok = lk.media.spdl_clips(jobs)
    assert len(ok.delivered) == 6 and not ok.failures
    for item in ok.delivered:
        clip = jobs[item["id"]][0]
        assert lk.media.check_clip(item["frames"], clip.indices).ok


# -- bad input ------------------------------------------------------------------------------------

@pytest.fixture
def damaged(videos, audio, tmp_path):
    src = path_of(videos, first(videos, 25)["id"])
    data = src.read_bytes()
    (tmp_path / "cut.mp4").write_bytes(data[:len(data) // 2])
    (tmp_path / "text.mp4").write_text("this is not a video\n" * 40)
    (tmp_path / "empty.mp4").write_bytes(b"")
    wav = next(f for f in audio.meta["files"] if f["format"] == "wav")
    raw = (audio.path / wav["file"]).read_bytes()
    (tmp_path / "magic.wav").write_bytes(b"RIFX" + raw[4:])          # not a RIFF header
    (tmp_path / "rate.wav").write_bytes(raw[:24] + (0).to_bytes(4, "little") + raw[28:])
    (tmp_path / "cut.wav").write_bytes(raw[:len(raw) // 3])
    return tmp_path


@pytest.mark.timeout(60)
@pytest.mark.parametrize("backend", ["torchcodec", "pyav"])
def test_truncated_mp4_names_the_file_and_the_time(damaged, backend):
    cut = damaged / "cut.mp4"
    before_cut = lk.media.decode_clip(cut, [10, 11], backend)
    assert lk.media.check_clip(before_cut, [10, 11]).ok
    with pytest.raises(lk.media.MediaError, match=rf"{cut}: .*frame 180.*(7\.200 s|cut short)"):
        lk.media.decode_clip(cut, [180, 181], backend)
    cannot = rf"{cut}: cannot decode .*frame \d+ \(at \d+\.\d+ s"
    with pytest.raises(lk.media.MediaError, match=cannot):
        lk.media.decode_all(cut, backend)


@pytest.mark.parametrize("backend", ["torchcodec", "pyav"])
@pytest.mark.parametrize(("name", "what"), [("text.mp4", "cannot open as (video|media)"),
                                             ("empty.mp4", "zero-length file"),
                                             ("missing.mp4", "no such file")])
def test_not_media_empty_and_missing_are_named(damaged, backend, name, what):
    with pytest.raises(lk.media.MediaError, match=rf"{damaged / name}: {what}"):
        lk.media.decode_clip(damaged / name, [0], backend)


def test_in_memory_bytes_that_are_not_video_are_named():
    with pytest.raises(lk.media.MediaError, match=r"<0 bytes in memory>: empty"):
        lk.media.decode_clip(b"", [0])
    with pytest.raises(lk.media.MediaError, match=r"<400 bytes in memory>: cannot open"):
        lk.media.decode_clip(b"x" * 400, [0], "pyav")


@pytest.mark.parametrize("backend", ["torchcodec", "pyav"])
@pytest.mark.parametrize(("name", "what"), [("magic.wav", "not a valid WAV header"),
                                             ("rate.wav", "implausible WAV header.*0 Hz"),
                                             ("cut.wav", "the WAV header promises .*truncated"),
                                             ("empty.mp4", "zero-length")])
def test_audio_with_a_wrong_header_is_named(damaged, backend, name, what):
    with pytest.raises(lk.media.MediaError, match=rf"{damaged / name}: {what}"):
        lk.media.audio_window(damaged / name, 0.0, 1.0, backend=backend)


def test_a_broken_video_in_a_shard_is_named_or_skipped_and_counted(videos, tmp_path):
    import tarfile

    shards = tmp_path / "shards"
    shutil.copytree(videos.path / "shards", shards)
    victim = sorted(shards.glob("*.tar"))[0]
    members = []
    with tarfile.open(victim) as tar:
        for m in tar:
            members.append((m, tar.extractfile(m).read()))
    with tarfile.open(victim, "w", format=tarfile.USTAR_FORMAT) as tar:
        for m, data in members:
            if m.name == "000001.mp4":
                data = b"not a video" * 10
                m.size = len(data)
            tar.addfile(m, __import__("io").BytesIO(data))
    stream = lk.media.ClipShardStream(shards, clips_per_video=1, frames=4, seed=0)
    with pytest.raises(lk.media.MediaError, match=rf"{victim}: sample 000001: .*cannot open"):
        list(stream)
    skipping = lk.media.ClipShardStream(shards, clips_per_video=1, frames=4, seed=0,
                                        skip_errors=True)
    assert len(list(skipping)) == 5 and len(skipping.errors) == 1


def test_bad_arguments_fail_fast(videos):
    path = path_of(videos, 0)
    with pytest.raises(ValueError, match="backend must be one of"):
        lk.media.decode_clip(path, [0], "opencv")
    with pytest.raises(ValueError, match="seek must be one of"):
        lk.media.decode_clip(path, [0], seek="nearest")
    with pytest.raises(lk.media.MediaError, match=rf"{path}: frame 999 is outside 0..199"):
        lk.media.decode_clip(path, [999])
    with pytest.raises(ValueError, match="device= is a torchcodec option"):
        lk.media.decode_clip(path, [0], "pyav", device="cuda")


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
    from labkit.tools import cli

    # labkit lab prints each failing check of labkit doctor, FFmpeg's among them
    monkeypatch.setitem(optional._CHECKS, "ffmpeg", lambda: (False, "REASON: " + FFMPEG_INSTALL))
    monkeypatch.setattr(cli, "ensure_fixtures", lambda **kw: {})
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
    from labkit.tools.bench import BENCHMARKS

    assert "media" in BENCHMARKS and "16-frame clips" in BENCHMARKS["media"].goal


def test_media_benchmark_runs_tiny(videos):
    """CI does not run the benchmarks (`make bench` does): this keeps this one working."""
    r = lk.tools.run_benchmark("media", scale="ci", num_workers=2, clips=32, rounds=2)
    assert r["workers_clips_per_s"] > 0 and r["single_core_clips_per_s"] > 0
    assert r["keyframe_interval_far"] > r["keyframe_interval_near"]
    assert {"clip_cost_ratio_far_over_near", "verdict", "goal_met"} <= set(r)
    assert lk.worker_processes() == []


@pytest.mark.gpu(probe="media_gpu")  # skipped, with the reason, where it cannot run
def test_gpu_clip_decode_returns_the_right_frames(videos):
    v = first(videos, 25)
    clip = lk.media.clip_indices(30, 8, 2)
    frames = lk.media.decode_clip(path_of(videos, v["id"]), clip, device="cuda")
    assert frames.is_cuda and lk.media.check_clip(frames.cpu(), clip).ok


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
