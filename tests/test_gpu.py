"""labkit.images.gpu: guarded GPU decode paths say why they cannot run; run them where they can."""

from __future__ import annotations

import json
import os

import pytest
import torch
from gpu_gate import gpu_gate

import labkit as lk
from labkit.images import gpu


def test_status_is_a_reason_not_an_exception():
    for name in ("gpu_decode", "kornia_gpu", "dali"):
        ok, reason = lk.status(name)
        assert isinstance(ok, bool) and isinstance(reason, str) and reason


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only behaviour")
def test_gpu_paths_refuse_with_the_reason(ci_fixture):
    blobs = lk.images.file_bytes(ci_fixture("images").file_list(".jpg")[:2])
    with pytest.raises(lk.LabkitError, match="GPU JPEG decode cannot run here"):
        gpu.gpu_decode_rate(blobs)


def test_nvjpeg_timing_holds_the_decode_calls_alone(monkeypatch):
    """Review 10-F2: gpu_decode_rate probes CUDA and picks the decoder once, before the clock;
    the timed loop calls the decode and nothing else (no status, no package metadata)."""
    calls = {"status": 0, "metadata": 0, "decode": 0}

    def fake_status(name, **options):
        calls["status"] += 1
        return True, "CUDA: a device"

    def fake_decode(batch):
        calls["decode"] += 1
        return batch

    def no_metadata(*args, **kwargs):
        calls["metadata"] += 1
        raise AssertionError("a package-metadata lookup in the nvJPEG path")

    monkeypatch.setattr(gpu, "status", fake_status)
    monkeypatch.setattr(gpu, "library_status", no_metadata)
    monkeypatch.setattr(gpu, "_nvjpeg", lambda device: ("torchcodec", fake_decode))
    monkeypatch.setattr(gpu, "best_of", lambda fn, repeats, warmup, sync: lk.best_of(
        fn, repeats=repeats, warmup=warmup))  # no CUDA here to synchronise
    r = gpu.gpu_decode_rate([b"x"] * 5, batch_size=2, device="cpu", repeats=3)
    assert calls == {"status": 1, "metadata": 0, "decode": 1 + 3 * 3}  # warm-up + 3 x 3 batches
    assert r["images"] == 5 and r["samples_per_s"] > 0


@pytest.mark.gpu(probe="gpu_decode")  # skipped, with the reason, where it cannot run
def test_nvjpeg_matches_cpu_decode(ci_fixture):
    files = ci_fixture("images").file_list(".jpg")[:16]
    blobs = lk.images.file_bytes(files)
    out = gpu._decoder("cuda")([torch.frombuffer(bytearray(b), dtype=torch.uint8) for b in blobs])
    assert len(out) == 16
    for b, x in zip(blobs, out, strict=True):
        ref = torch.from_numpy(lk.images.decode_jpeg(b).transpose(2, 0, 1).copy())
        assert x.shape == ref.shape and x.device.type == "cuda"
        # Not pixel-exact in RGB: libjpeg-turbo's "fancy" chroma upsampling and nvJPEG's
        # differ at colour edges (an H200 showed up to 66 levels on these 64x64 stripes).
        # The luma both rebuild from the same Y plane agrees to rounding (max 1 level there):
        # that is what "the same image" means across JPEG decoders. And RGB, not BGR.
        luma = torch.tensor([0.299, 0.587, 0.114]).view(3, 1, 1)
        y, r = x.cpu().float(), ref.float()
        assert ((y - r) * luma).sum(0).abs().max() <= 2
        assert (y - r).abs().mean() < (y - r.flip(0)).abs().mean()
    r = gpu.gpu_decode_rate(blobs, batch_size=8, repeats=1)
    assert r["samples_per_s"] > 0


def test_make_test_gpu_fails_a_gpu_path_that_cannot_run_beside_a_gpu():
    why = "torchvision missing"
    assert gpu_gate("gpu_decode", why, cuda=False, env={"LABKIT_REQUIRE_GPU": "1"}) == (
        "skip", why)  # no GPU: a skip, with the reason
    assert gpu_gate("gpu_decode", why, cuda=True, env={})[0] == "skip"  # plain `make test`
    verdict, msg = gpu_gate("gpu_decode", why, cuda=True, env={"LABKIT_REQUIRE_GPU": "1"})
    assert verdict == "fail" and why in msg
    verdict, msg = gpu_gate("dali", why, cuda=True, env={"LABKIT_REQUIRE_GPU": "1",
                                                         "LABKIT_GPU_LEAVE_OUT": "dali,media_gpu"})
    assert verdict == "skip" and "LABKIT_GPU_LEAVE_OUT" in msg


def test_make_test_gpu_fails_a_chapter_whose_gpu_cells_did_not_run(tmp_path):
    from labkit_tools.benchmarks.gpu import GPU_CHAPTERS, gpu_cells_not_run

    def record(chapter, *said):
        rec = lk.Checkpoint(chapter, records_dir=tmp_path)
        for value, note in said:
            rec.observe("gpu_paths", value, "", note=note)
        rec.observe("x", 1, "count").write(print_summary=False)

    record("09_prefetch", ("ran", None))
    record("09b_pinned_memory_and_streams", ("ran", None))
    record("10_decode_and_augment", ("skipped", "torchvision missing"))
    record("10b_decode_less_and_gpu", ("ran", None))
    record("13_profiling")
    record("15b_audio_spdl_nvdec", ("skipped", "NVDEC needs torchcodec's CUDA build"))  # by stem
    problems = gpu_cells_not_run(tmp_path)
    assert problems == ["10_decode_and_augment: GPU cells skipped: torchvision missing",
                        "13_profiling: its record says nothing of its GPU cells (gpu_paths)",
                        "15b_audio_spdl_nvdec: GPU cells skipped: NVDEC needs "
                        "torchcodec's CUDA build",
                        "16_capstone: no record (it did not reach its checkpoint cell)"]
    # what the machine cannot bring is left out; only the chapters asked for are checked
    assert gpu_cells_not_run(tmp_path, ["09_prefetch", "further/15b_audio_spdl_nvdec"],
                             leave_out=["media_gpu"]) == []
    # every one of them says it, in its checkpoint cell
    for chapter in GPU_CHAPTERS:
        nb = lk.paths.REPO_ROOT / "notebooks" / f"{lk.paths.notebook_path(chapter)}.ipynb"
        cells = json.loads(nb.read_text())
        code = "".join("".join(c["source"]) for c in cells["cells"] if c["cell_type"] == "code")
        assert 'rec.observe("gpu_paths"' in code, chapter


def test_bench_gpu_without_cuda_says_why_and_records_it(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("checks the CPU-only behaviour")
    from labkit_tools.bench import record_result, run_benchmark

    r = run_benchmark("gpu")
    assert r["verdict"] == "skipped" and "CUDA" in r["skipped"]
    rec = json.loads(record_result(r, tmp_path).read_text())
    assert rec["chapter"] == "bench_gpu"
    assert {o["name"] for o in rec["observations"]} >= {"skipped", "verdict"}


def test_the_committed_gpu_reference_holds_every_figure_issue_34_asks_for():
    ref = lk.records.reference_figures("nvidia-h200")
    assert ref["device"].startswith("NVIDIA") and ref["cuda"]  # the GPU and torch's CUDA
    for mib in (1, 4, 16, 64):
        for way in ("pageable", "pin_in_loop", "pinned", "dataloader_pin_thread"):
            assert ref[f"host_to_device_gb_s.{mib}MiB.{way}.median"] > 0
    for loop in ("loader_plain", "loader_prefetcher", "pinned_plain", "pinned_prefetcher"):
        assert 0 <= ref[f"prefetch.{loop}.wait_fraction.median"] <= 1
    assert ref["decode.nvjpeg_images_per_s.median"] > 0
    assert ref["capstone.tuned.samples_per_s"] > ref["capstone.naive.samples_per_s"]
    with pytest.raises(lk.LabkitError, match="does not exist"):
        lk.records.reference_figures("no-such-machine")


def test_a_benchmark_record_names_each_figures_unit(tmp_path):
    from labkit_tools.bench import record_result

    result = {"benchmark": "x", "goal": "g", "copy_gb_s": {"median": 50.0, "n": 10},
              "loop_ms_per_batch": 5.1, "waits": {"wait_fractions": [0.01, 0.2]}}
    obs = json.loads(record_result(result, tmp_path).read_text())["observations"]
    assert {o["name"]: o["unit"] for o in obs} == {
        "copy_gb_s.median": "GB/s", "copy_gb_s.n": "count", "loop_ms_per_batch": "ms",
        "waits.wait_fractions.0": "fraction", "waits.wait_fractions.1": "fraction"}


def test_the_gpu_wheel_bundle_is_whole():
    """.ci/gpu-bundle fetches its list with --no-deps for a server without a registry: every
    requirement of a listed distribution (at the version .venv has) must be listed too, or be
    one the server has (.ci/gpu-server-has.txt). A dependency that a new release adds fails
    here, not on the GPU machine."""
    import importlib.metadata as md
    import re

    from packaging.requirements import Requirement

    def names(path):
        text = (lk.paths.REPO_ROOT / ".ci" / path).read_text()
        return {re.sub(r"[-_.]+", "-", n).lower()
                for n in (line.split("#")[0].strip() for line in text.splitlines()) if n}

    listed, has = names("gpu-bundle.txt"), names("gpu-server-has.txt")
    assert {"nbval", "ipykernel", "kornia", "albumentations"} <= listed and "torch" in has
    missing = []
    for dist in sorted(listed):
        try:  # what another platform's or version's environment lacks is not judged here
            requires = md.requires(dist) or []
        except md.PackageNotFoundError:
            continue
        for line in requires:
            req = Requirement(line)
            if req.marker and not req.marker.evaluate({"extra": ""}):
                continue  # an extra's, or another platform's
            if re.sub(r"[-_.]+", "-", req.name).lower() not in listed | has:
                missing.append(f"{dist} needs {req.name}")
    assert missing == []


def test_test_gpu_chapters_reads_its_list_from_gpu_py():
    """.ci/test-gpu-chapters' default is GPU_CHAPTERS itself, each as its path under
    notebooks/ (labkit.paths.notebook_path): one list, and every path a notebook."""
    import subprocess
    import sys

    from labkit_tools.benchmarks.gpu import GPU_CHAPTERS

    script = lk.paths.REPO_ROOT / ".ci" / "test-gpu-chapters"
    body = script.read_text()
    fn = body[body.index("default_chapters() {"):]
    fn = fn[:fn.index("\n}\n") + 3]
    out = subprocess.run(["bash", "-c", f'py="$1"\n{fn}default_chapters', "_", sys.executable],
                         capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(lk.paths.REPO_ROOT)}).stdout
    listed = out.split()
    assert [p.rsplit("/", 1)[-1] for p in listed] == list(GPU_CHAPTERS)
    for p in listed:
        assert (lk.paths.REPO_ROOT / "notebooks" / f"{p}.ipynb").is_file(), p
