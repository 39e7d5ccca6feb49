"""``labkit bench gpu``: the accelerator side, measured where a CUDA GPU is (chapters 09, 10, 16).

Host-to-device, a GPU step's data-wait plain and prefetched (09), nvJPEG vs the CPU decoders
(10), the capstone naive and tuned (16); not NVDEC (15b): PyPI's torchcodec is a CPU build.
"""

from __future__ import annotations

import statistics
import time

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

from labkit.data.writers import encode_jpeg
from labkit.facilities import usable_cores
from labkit.images.decode import decode_jpeg, fastest_decoder
from labkit.images.gpu import gpu_decode_rate
from labkit.instruments.meter import measure
from labkit.instruments.stats import judge
from labkit.instruments.timer import best_of
from labkit.loading.loaders import WORKER_TIMEOUT_S
from labkit.optional import status
from labkit.records.checkpoint import load_records

from .registry import benchmark


def _side_stream(source, side):
    """Chapter 09b's ``cuda_stream_prefetch``: batch i+1 copied on stream ``side`` during
    step i; ``record_stream`` keeps the allocator from reusing a batch's memory early."""
    def copy(host):
        with torch.cuda.stream(side):
            return host.to(DEV, non_blocking=True)

    it = iter(source)
    nxt = copy(host) if (host := next(it, None)) is not None else None
    while nxt is not None:
        compute = torch.cuda.current_stream()
        compute.wait_stream(side)
        batch = nxt
        batch.record_stream(compute)
        nxt = copy(host) if (host := next(it, None)) is not None else None
        yield batch


WAIT_GOAL = 0.05  # seed 000: "GPU util 95 %+"
MIB = 2 ** 20
DEV = "cuda"  # one name for the device, so a CPU-only smoke run can stand in for it


def image_train_step(channels: int = 16, classes: int = 10, seed: int = 0, device: str = DEV):
    """Chapter 16's train step (the copy its notebook types): a small CNN + SGD on
    ``{"image": uint8 NCHW, "label"}`` batches; ``loss.item()`` waits for the device."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, channels, 4, stride=4), torch.nn.ReLU(),
        torch.nn.Conv2d(channels, channels, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
        torch.nn.Linear(channels, classes)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(batch) -> float:
        x = batch["image"].to(device, non_blocking=True).float().div_(255).sub_(0.5)
        loss = torch.nn.functional.cross_entropy(model(x), batch["label"].to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    step.label = f"small CNN ({channels} channels) + SGD on {torch.device(device).type}"
    return step


def _spread(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "n": len(values)}


def _timed(fn, repeats: int) -> list[float]:
    """Seconds per call of ``fn``, the device synchronised around each; one warm-up call."""
    return list(best_of(fn, repeats=repeats, warmup=1, sync="cuda").trials_s)


def host_to_device(sizes_mib=(1, 4, 16, 64), repeats: int = 10) -> dict:
    """GB/s of each way to copy a batch to the GPU, per batch size (median, min, max)."""
    out = {}
    for mib in sizes_mib:
        n = mib * MIB
        pageable = torch.randint(0, 255, (n,), dtype=torch.uint8)
        pinned = pageable.pin_memory()
        ways = {"pageable": lambda t=pageable: t.to(DEV),
                "pin_in_loop": lambda t=pageable: t.pin_memory().to(DEV, non_blocking=True),
                "pinned": lambda t=pinned: t.to(DEV, non_blocking=True)}
        row = {w: _spread([n / s / 1e9 for s in _timed(f, repeats)]) for w, f in ways.items()}
        # A worker DataLoader's hand-over + pin thread + copy, beside it without pin_memory;
        # persistent workers and a warm-up pass (09-F4: fresh workers read as slow)
        for pin, name in ((True, "dataloader_pin_thread"), (False, "dataloader_pageable")):
            same = [pageable] * (repeats * 4)  # one tensor: a worker hands over its handle
            loader = DataLoader(same, batch_size=None, num_workers=2, pin_memory=pin,
                                persistent_workers=True, timeout=WORKER_TIMEOUT_S)
            passes = []
            for i in range(4):  # pass 0: the warm-up
                t0 = time.perf_counter()
                for x in loader:
                    x.to(DEV, non_blocking=pin)
                torch.cuda.synchronize()
                if i:
                    passes.append(len(loader) * n / (time.perf_counter() - t0) / 1e9)
            del loader  # stops its persistent workers
            row[name] = _spread(passes)
        out[f"{mib}MiB"] = row
    return out


def _gpu_step(target_ms: float, dim: int = 4096):
    """A step of bf16 matmuls sized to ``target_ms`` on this GPU, reading the whole batch."""
    a = torch.randn(dim, dim, device=DEV, dtype=torch.bfloat16)

    def run(k):
        def step(x):
            acc = x.float().mean()  # depends on every byte copied
            y = a
            for _ in range(k):
                y = torch.tanh(y @ a)
            return (acc + y[0, 0].float()).item()  # the CPU waits for the GPU, as .item() does
        return step

    one = statistics.median(_timed(lambda: run(1)(a), 5))
    k = max(1, round(target_ms / 1e3 / one))
    return run(k), k


def prefetch_wait(batch: int = 128, size: int = 224, batches: int = 48, step_ms: float = 8.0,
                  repeats: int = 3, dim: int = 4096) -> dict:
    """Data-wait of the plain loop vs the CUDA-stream prefetcher with a real GPU step: the
    plain loop copies on the default stream, so its copy runs before the step."""
    workers = max(2, min(8, usable_cores() - 1))
    host = [torch.randint(0, 255, (batch, 3, size, size), dtype=torch.uint8) for _ in range(4)]
    pinned = [x.pin_memory() for x in host]
    in_memory = [pinned[i % 4] for i in range(batches)]
    pageable = [host[i % 4] for i in range(batches)]  # a bank of 4: making a batch costs little
    loader = DataLoader(pageable, batch_size=None, num_workers=workers, pin_memory=True,
                        persistent_workers=True, prefetch_factor=4, timeout=WORKER_TIMEOUT_S)
    step, k = _gpu_step(step_ms, dim)
    resident = torch.randint(0, 255, (batch, 3, size, size), dtype=torch.uint8, device=DEV)
    alone = _timed(lambda: [step(resident) for _ in range(batches)], repeats)

    def plain(source, non_blocking=True):
        def loop():
            for x in source:
                step(x.to(DEV, non_blocking=non_blocking))
        return loop

    side = torch.cuda.Stream()  # one side stream for every pass (09-F2)

    def prefetched(source):
        def loop():
            for x in _side_stream(source, side):
                step(x)
        return loop

    out = {"batch_mib": batch * 3 * size * size / MIB, "batches": batches, "workers": workers,
           "matmuls_per_step": k, "step_ms_alone": _spread([s / batches * 1e3 for s in alone])}
    loops = {"loader_plain": plain(loader), "loader_prefetcher": prefetched(loader),
             "pinned_plain": plain(in_memory), "pinned_prefetcher": prefetched(in_memory),
             "pageable_plain": plain(pageable, non_blocking=False)}
    for name, loop in loops.items():
        # paired with the step alone: 1 - alone / loop, the share of the loop not stepping
        times = _timed(loop, repeats)
        out[name] = {"loop_ms_per_batch": _spread([t / batches * 1e3 for t in times]),
                     "wait_fraction": _spread([max(0.0, 1 - a / t)
                                               for a, t in zip(alone, times, strict=True)])}
    return out  # the persistent workers stop with the loader, here


def _photo_jpegs(n: int, px: int = 512, seed: int = 0) -> list[bytes]:
    """Photo-like JPEGs (smooth, quality 90), as 10b's section 1 (decode less) makes them."""
    rng = np.random.default_rng(seed)
    return [encode_jpeg(np.asarray(Image.fromarray(rng.integers(0, 256, (32, 32, 3), np.uint8))
                                   .resize((px, px), Image.BICUBIC)), quality=90)
            for _ in range(n)]


def decode_rates(n: int = 256, batch: int = 64) -> dict:
    """nvJPEG images/s against the fastest CPU decoder's, one core and times the cores."""
    blobs = _photo_jpegs(n)
    name, rates = fastest_decoder(blobs)
    gpu = [gpu_decode_rate(blobs, batch_size=batch, repeats=1)["samples_per_s"] for _ in range(5)]
    cores = usable_cores()
    return {"images": n, "px": 512, "cpu_decoder": name, "cpu_one_core_images_per_s": rates[name],
            "cores": cores, "cpu_all_cores_images_per_s_bound": rates[name] * cores,
            "nvjpeg_images_per_s": _spread(gpu)}


class _JpegDataset(Dataset):
    """Chapter 16's work per sample: decode a 512 px JPEG, crop 224 x 224, a label."""

    def __init__(self, blobs: list[bytes], decoder: str):
        self.blobs, self.decoder = blobs, decoder

    def __len__(self) -> int:
        return len(self.blobs)

    def __getitem__(self, i):
        img = decode_jpeg(self.blobs[i], self.decoder)[16:240, 16:240]
        return {"image": torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1))),
                "label": i % 10}


def capstone_wait(n: int = 4096, batch: int = 64, repeats: int = 10, dim: int = 4096) -> dict:
    """The capstone's loop on the GPU, naive beside tuned; the small CNN outruns the cores'
    decode, so the goal is judged on a step made heavier (bf16 matmuls) to run at 80 % of
    the loader's rate, over ``repeats`` passes (10: the sign test's 95 % interval)."""
    blobs = _photo_jpegs(64)
    name, rates = fastest_decoder(blobs)
    ds = _JpegDataset([blobs[i % 64] for i in range(n)], name)
    small = image_train_step(channels=64, device=DEV)
    cores = usable_cores()

    def tuned(workers):
        return DataLoader(ds, batch_size=batch, shuffle=True, num_workers=workers, pin_memory=True,
                          persistent_workers=True, prefetch_factor=4, timeout=WORKER_TIMEOUT_S)

    out = {"decoder": name, "cores": cores, "batch_size": batch, "step": small.label,
           "decode_one_core_samples_per_s": rates[name],
           "decode_bound_samples_per_s": rates[name] * cores}

    def run(label, loader, step, max_batches=None, repeats=repeats):
        m = measure(loader, step=step, repeats=repeats, max_batches=max_batches, name=label)
        out[label] = {"samples_per_s": m.samples_per_s,
                      "samples_per_s_range": list(m.samples_per_s_range),
                      "wait_fractions": [float(p.wait.sum() / p.steady_s) for p in m.passes]}

    run("naive", DataLoader(ds, batch_size=batch, shuffle=True), small, max_batches=8,
        repeats=3)  # one core decoding: slow, and its verdict is plain at 3 passes
    loader = tuned(cores)
    run("tuned", loader, small)
    bound = out["decode_bound_samples_per_s"]
    out["tuned_over_decode_bound"] = out["tuned"]["samples_per_s"] / bound
    x = {k: v.to(DEV) for k, v in next(iter(DataLoader(ds, batch_size=batch))).items()}
    out["step_alone_samples_per_s"] = _spread([batch / s for s in _timed(lambda: small(x), 10)])
    # a step the loader can feed: matmuls added until it runs at 80 % of the loader's rate
    target_ms = batch / (0.8 * out["tuned"]["samples_per_s"]) * 1e3
    extra, k = _gpu_step(max(0.1, target_ms - batch / out["step_alone_samples_per_s"]["median"]
                             * 1e3), dim)

    def heavier(b):
        extra(x["image"])  # the added GPU work, on the resident batch
        return small(b)

    heavier_alone = _spread([batch / s for s in _timed(lambda: heavier(x), 10)])
    out["heavier_step"] = {"matmuls": k, "alone_samples_per_s": heavier_alone}
    run("tuned_heavier_step", loader, heavier)
    # the main process needs a core too: the same, one worker fewer than the cores
    run("tuned_heavier_step_one_core_free", tuned(max(1, cores - 1)), heavier)
    return out


@benchmark("gpu", goal=f"on a CUDA GPU: the capstone's tuned loader keeps a GPU step it can "
                       f"feed (80 % of its rate) waiting <= {WAIT_GOAL:.0%} of the loop "
                       "(median over passes, interval); with the chapter's small CNN, the "
                       "ceiling that stops it (decode per core x cores); "
                       "host-to-device GB/s pageable / pinned / pin thread per batch size, "
                       "the CUDA-stream prefetcher's data-wait and nvJPEG vs CPU decode "
                       "printed beside. Without CUDA: skipped, with the reason")
def gpu() -> dict:
    """Every GPU figure of issue 34; ``{"skipped": why}`` without CUDA."""
    ok, reason = status("cuda")
    if not ok:
        return {"skipped": reason, "verdict": "skipped"}
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
              "cuda": torch.version.cuda, "cores": usable_cores(),
              "host_to_device_gb_s": host_to_device(), "prefetch": prefetch_wait(),
              "decode": decode_rates(), "capstone": capstone_wait()}
    waits = result["capstone"]["tuned_heavier_step"]["wait_fractions"]
    return result | judge("tuned_wait_fraction", waits, WAIT_GOAL, higher_is_better=False)


#: The notebooks with GPU cells, by stem (``.ci/test-gpu-chapters`` reads this list), and the
#: probe (``lk.status``) each one's GPU path needs; each records ``gpu_paths`` ("ran" or why not).
GPU_CHAPTERS = {"09_prefetch": "cuda", "09b_pinned_memory_and_streams": "cuda",
                "10_decode_and_augment": "cuda", "10b_decode_less_and_gpu": "gpu_decode",
                "13_profiling": "cuda", "15b_audio_spdl_nvdec": "media_gpu", "16_capstone": "cuda"}


def gpu_cells_not_run(records_dir, chapters=tuple(GPU_CHAPTERS), leave_out=()) -> list[str]:
    """``make test-gpu``'s check: a line for each chapter whose GPU cells did not run."""
    newest = {r["chapter"]: r for r in load_records(records_dir)}  # oldest first
    problems = []
    for chapter in chapters:
        stem = chapter.rsplit("/", 1)[-1]   # a path under notebooks/ or a stem; records: stems
        if GPU_CHAPTERS.get(stem, "cuda") in leave_out:
            continue
        record = newest.get(stem)
        said = [o for o in (record or {}).get("observations", []) if o["name"] == "gpu_paths"]
        if record is None:
            problems.append(f"{chapter}: no record (it did not reach its checkpoint cell)")
        elif not said:
            problems.append(f"{chapter}: its record says nothing of its GPU cells (gpu_paths)")
        elif said[-1]["value"] != "ran":
            problems.append(f"{chapter}: GPU cells {said[-1]['value']}: {said[-1]['note']}")
    return problems
