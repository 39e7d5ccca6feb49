"""labkit.capstone.pipeline: the packed format, the tuning steps, the audited measurement (ch.
11)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Subset

import labkit as lk
from labkit.capstone.pipeline import measure_audited
from tests.contracts import check_exactly_once

TIMEOUT_S = 60  # a stuck worker fails the test instead of hanging it


@pytest.fixture(scope="module")
def images(ci_fixture):
    return ci_fixture("images")


@pytest.fixture(scope="module")
def packed(images, tmp_path_factory):
    return lk.images.pack_images(images, tmp_path_factory.mktemp("packed"))


def test_packed_equals_the_folder(images, packed):
    folder = lk.ImageFolderDataset(images)
    ds = lk.images.PackedImages(packed)
    assert len(ds) == len(folder) == images.samples

    def ids_images(d):
        return [(s["id"], s["label"], s["image"].numpy()) for s in (d[i] for i in range(40))]

    for (i, lab, img), (j, lab2, img2) in zip(ids_images(ds), ids_images(folder), strict=True):
        assert (i, lab) == (j, lab2)
        np.testing.assert_array_equal(img, img2)


def test_packed_exactly_once_over_workers(packed):
    def make(rank, world_size, num_workers):
        sampler = torch.utils.data.DistributedSampler(
            range(64), num_replicas=world_size, rank=rank, shuffle=False)
        ds = Subset(lk.images.PackedImages(packed), range(64))
        return DataLoader(ds, batch_size=8, num_workers=num_workers, sampler=sampler,
                          timeout=TIMEOUT_S if num_workers else 0)

    check_exactly_once(make, 64)


def test_packed_bad_input_names_the_file(packed, tmp_path):
    with pytest.raises(lk.DataFormatError, match="index.npy: not found"):
        lk.images.PackedImages(tmp_path)
    cut = tmp_path / "cut"
    cut.mkdir()
    (cut / "index.npy").write_bytes((packed / "index.npy").read_bytes())
    (cut / "images.bin").write_bytes((packed / "images.bin").read_bytes()[:100])
    with pytest.raises(lk.DataFormatError, match=r"images.bin: expected \d+ bytes .*found 100"):
        lk.images.PackedImages(cut)


def test_pack_missing_file_names_it(images, tmp_path):
    src = tmp_path / "src"
    lk.damaged_copy(images, src, "delete", file="images/0000003.jpg")
    with pytest.raises(lk.DataFormatError, match="0000003.jpg: cannot read sample 3"):
        lk.images.pack_images(src, tmp_path / "out")


def test_steps_change_one_thing_each():
    steps = lk.capstone.tuning_steps(num_workers=2, decoder="opencv", big_batch_size=64)
    assert [s.name for s in steps] == ["naive", "format", "workers", "persistent", "prefetch",
                                       "decode", "batching"]
    assert steps[0].config == {"format": "files", "decoder": "pil", "num_workers": 0,
                               "prefetch_factor": None, "persistent_workers": False,
                               "batch_size": 32}
    for a, b in zip(steps, steps[1:], strict=False):
        changed = {k for k in a.config if a.config[k] != b.config[k]}
        assert changed and changed <= {"format", "num_workers", "persistent_workers",
                                       "prefetch_factor", "decoder", "batch_size"}, b.name
    assert steps[-1].config["decoder"] == "opencv" and steps[-1].config["batch_size"] == 64
    # one knob per step: persistent workers and prefetch are two steps, not one
    assert steps[3].knobs == {"num_workers": 2, "persistent_workers": True}
    assert steps[4].knobs == {"num_workers": 2, "prefetch_factor": 4}
    # both need workers: tried with them even where the "workers" change was reverted
    assert all(s.config["num_workers"] == 2 for s in steps[3:5])
    with pytest.raises(ValueError, match="choose one of"):
        lk.capstone.tuning_steps(decoder="magic")


def loader_factory(images, packed, samples):
    """A step's config -> its DataLoader, as chapter 16 writes it in a cell."""
    def loader_for(config):
        if config["format"] == "files":
            ds = lk.ImageFolderDataset(images, decoder=config["decoder"])
        else:
            ds = lk.images.PackedImages(packed, decoder=config["decoder"])
        nw = config["num_workers"]
        return DataLoader(Subset(ds, range(samples)), batch_size=config["batch_size"],
                          shuffle=True, generator=torch.Generator().manual_seed(0),
                          num_workers=nw, timeout=TIMEOUT_S if nw else 0,
                          prefetch_factor=config["prefetch_factor"] if nw else None,
                          persistent_workers=config["persistent_workers"] and nw > 0)
    return loader_for


def test_run_tuning_audits_every_step(images, packed, live_workers, tmp_path):
    steps = lk.capstone.tuning_steps(num_workers=1, decoder="pil", big_batch_size=16)
    steps = [steps[0], steps[1], steps[2], steps[3], steps[6]]  # + persistent workers
    seen, alive, before = [], [], {p.pid for p in live_workers()}

    def on_step(result):  # the step's loaders are dropped by now: so are their workers
        seen.append(result)
        alive.append(len([p for p in live_workers() if p.pid not in before]))

    results = lk.capstone.run_tuning(steps, loader_factory(images, packed, 48),
                                     lk.capstone.image_train_step(),
                                     samples=48, pairs=2, warmup=0, on_step=on_step)
    assert len(seen) == 5 and alive == [0] * 5
    for r in results:
        assert r.audit.ok and r.audit.expected == 48, r.step.name
        assert r.samples_per_s > 0
    assert results[0].kept and lk.capstone.tuned_result(results).kept
    table = lk.capstone.format_tuning(results)
    assert table.splitlines()[2].startswith("naive") and "x naive" in table
    assert lk.capstone.plot_tuning(results) is not None
    ck = lk.Checkpoint("16_capstone", records_dir=tmp_path).add(results)
    assert [o["name"] for o in ck.observations[:4]] == [
        "tuning.samples_per_s", "tuning.kept", "tuning.gain", "tuning.exactly_once"]
    assert ck.observations[2]["config"]["pairs"] == 2 and len(ck.observations) == 4 * 5


@pytest.mark.parametrize("min_gain", [0.0, 1e9])
def test_a_change_that_does_not_help_is_reverted(images, packed, min_gain):
    """Each change runs on the best configuration so far; a reverted one is not carried on."""
    steps = lk.capstone.tuning_steps(num_workers=1, decoder="pil", big_batch_size=16)
    steps = [steps[0], steps[1], steps[6]]  # files, packed, batch size 16
    results = lk.capstone.run_tuning(steps, loader_factory(images, packed, 32),
                                     lk.capstone.image_train_step(),
                                     samples=32, pairs=1, warmup=0, min_gain=min_gain)
    naive = steps[0].config
    if min_gain == 0.0:  # every change kept: the configs accumulate
        assert [r.kept for r in results] == [True, True, True]
        assert results[2].config == {**naive, "format": "packed", "batch_size": 16}
        assert lk.capstone.tuned_result(results) is results[2]
    else:  # none kept: each change is tried alone on the naive configuration
        assert [r.kept for r in results] == [True, False, False]
        assert results[2].config == {**naive, "batch_size": 16}  # files, not packed
        assert lk.capstone.tuned_result(results) is results[0]
    assert "no " in lk.capstone.format_tuning(results) or min_gain == 0.0
    assert {r.verdict for r in results[1:]} == {"pass" if min_gain == 0.0 else "fail"}


def test_paired_gain_has_an_interval_and_a_verdict(images, packed):
    """Each change is timed in interleaved pairs against the best config so far."""
    steps = lk.capstone.tuning_steps(num_workers=1, decoder="pil", big_batch_size=16)
    results = lk.capstone.run_tuning([steps[0], steps[1]], loader_factory(images, packed, 32),
                            lk.capstone.image_train_step(), samples=32, pairs=3, warmup=0)
    r = results[1]
    assert len(r.measurement.passes) == 3 and r.audit.ok
    lo, hi = r.gain_ci
    assert lo <= r.gain <= hi and r.gain_level == pytest.approx(0.75)  # 3 pairs: full range
    assert r.kept == (r.verdict == "pass") and r.verdict in ("pass", "fail", "inconclusive")
    assert len(r.ratios) == 3 and (min(r.ratios), max(r.ratios)) == (lo, hi)  # the pairs kept
    assert results[0].verdict == "baseline"
    with pytest.raises(ValueError, match="at least one pair"):
        lk.capstone.run_tuning(steps[:1], loader_factory(images, packed, 32),
                               lk.capstone.image_train_step(), samples=32, pairs=0)


def test_tuning_result_round_trips_as_json(images, packed, tmp_path):
    steps = lk.capstone.tuning_steps(num_workers=1, decoder="pil", big_batch_size=16)
    results = lk.capstone.run_tuning([steps[0], steps[1]], loader_factory(images, packed, 32),
                                     lk.capstone.image_train_step(), samples=32, pairs=1,
                                     warmup=0, min_gain=0.0)
    path = lk.capstone.save_tuning(results, tmp_path / "tuned.json", samples=32)
    config = lk.capstone.load_tuning(path)
    assert config == results[1].config
    loader = loader_factory(images, packed, 8)(config)
    assert sum(len(b["id"]) for b in loader) == 8
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "something else"}')
    with pytest.raises(lk.LabkitError, match="bad.json: not a tuning record"):
        lk.capstone.load_tuning(bad)
    bad.write_text("{not json")
    with pytest.raises(lk.LabkitError, match="bad.json: not JSON"):
        lk.capstone.load_tuning(bad)
    with pytest.raises(lk.LabkitError, match="nope.json: cannot read"):
        lk.capstone.load_tuning(tmp_path / "nope.json")


def test_measure_audited_catches_a_repeat():
    batch = {"id": torch.arange(4), "image": torch.zeros(4, 3, 8, 8, dtype=torch.uint8),
             "label": torch.zeros(4, dtype=torch.int64)}
    m, a = measure_audited(lambda: [batch, batch], lambda b: None, 4, repeats=1, warmup=0)
    assert not a.ok and a.duplicates == 4
    assert m.epoch_samples_per_s > 0


def test_train_step_learns_deterministically():
    x = {"image": torch.randint(0, 255, (8, 3, 32, 32), dtype=torch.uint8,
                                generator=torch.Generator().manual_seed(0)),
         "label": torch.arange(8) % 10}
    a, b = lk.capstone.image_train_step(seed=1), lk.capstone.image_train_step(seed=1)
    losses = [a(x) for _ in range(5)]
    assert losses == [b(x) for _ in range(5)]
    assert losses[-1] < losses[0]
    assert a.label.endswith("on cpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
def test_train_step_on_the_gpu_matches_the_cpu_start():
    x = {"image": torch.randint(0, 255, (8, 3, 32, 32), dtype=torch.uint8,
                                generator=torch.Generator().manual_seed(0)),
         "label": torch.arange(8) % 10}
    gpu = lk.capstone.image_train_step(seed=1, device="cuda")
    cpu = lk.capstone.image_train_step(seed=1)
    assert next(gpu.model.parameters()).is_cuda and gpu.label.endswith("on cuda")
    assert gpu(x) == pytest.approx(cpu(x), rel=1e-3)   # same weights, same first loss


def test_fastest_decoder(images):
    blobs = lk.images.file_bytes(images.file_list(".jpg")[:8])
    name, rates = lk.images.fastest_decoder(blobs, rounds=1)
    assert set(rates) == set(lk.images.available_decoders()) and name in rates
    assert rates[name] == max(rates.values())
