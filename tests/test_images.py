"""labkit.images: decoders, the image-folder dataset, augmentation (chapter 10)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

import labkit as lk
from labkit.data.faults import damage
from labkit.images.decode import available_decoders
from labkit.images.folder import skip_collate
from tests.chapter_code import chapter_module
from tests.contracts import check_exactly_once, check_lazy_equals_eager


@pytest.fixture(scope="module")
def images(ci_fixture):
    return ci_fixture("images")


@pytest.mark.parametrize("decoder", ["opencv", "simplejpeg"])
def test_decoders_agree_with_pil(images, decoder):
    if decoder not in available_decoders():
        pytest.skip(f"{decoder} not installed")
    for f in images.file_list(".jpg")[:20]:
        data = f.read_bytes()
        ref = lk.images.decode_jpeg(data, "pil")
        got = lk.images.decode_jpeg(data, decoder)
        assert got.shape == ref.shape == (images.meta["size"], images.meta["size"], 3)
        assert got.dtype == np.uint8
        # same libjpeg-turbo family: identical or within JPEG IDCT rounding
        assert np.abs(got.astype(int) - ref).max() <= 2, f.name


def test_unknown_decoder():
    with pytest.raises(ValueError, match="choose one of pil"):
        lk.images.decode_jpeg(b"", "magic")


def test_dataset_samples_and_labels(images):
    ds = lk.ImageFolderDataset(images)
    assert len(ds) == images.samples
    s = ds[3]
    assert s["image"].shape == (3, images.meta["size"], images.meta["size"])
    assert s["image"].dtype == torch.uint8 and s["id"] == 3
    assert 0 <= s["label"] < images.meta["classes"]


@pytest.mark.parametrize("decoder", ["pil", "opencv", "simplejpeg"])
def test_exactly_once_every_decoder(images, decoder):
    ds = lk.ImageFolderDataset(images, decoder=decoder)
    sub = torch.utils.data.Subset(ds, range(64))

    def make(rank, world_size, num_workers):
        s = torch.utils.data.distributed.DistributedSampler(
            sub, num_replicas=world_size, rank=rank, shuffle=False)
        return DataLoader(sub, batch_size=16, num_workers=num_workers, sampler=s,
                          timeout=60 if num_workers else 0)  # torch: none without workers

    check_exactly_once(make, 64, workers=(0, 2) if decoder != "pil" else (0, 1, 2))


def test_lazy_equals_eager(images):
    ds = lk.ImageFolderDataset(images)
    sub = torch.utils.data.Subset(ds, range(40))
    n = check_lazy_equals_eager(DataLoader(sub, batch_size=8, num_workers=2, timeout=60),
                                lambda i: lk.images.decode_jpeg(ds.read(i)).transpose(2, 0, 1),
                                values_of=lambda b: b["image"])
    assert n == 40


@pytest.mark.parametrize("how", ["truncate", "flip"])
@pytest.mark.parametrize("decoder", ["pil", "opencv", "simplejpeg"])
def test_corrupt_jpeg_error_names_the_file(images, tmp_path, how, decoder):
    folder = tmp_path / "images"
    # flipped bytes inside the entropy-coded data may still decode (to garbage pixels, as
    # real bit rot does); flipped header bytes are what every decoder must refuse
    lk.damaged_copy(images, folder, how, file="images/0000007.jpg",
                    at=0.3 if how == "truncate" else 0.0, length=64)
    ds = lk.ImageFolderDataset(folder, decoder=decoder)
    with pytest.raises(lk.DataFormatError, match=r"0000007\.jpg.*sample 7"):
        ds[7]


def test_missing_file_names_it(images, tmp_path):
    folder = tmp_path / "images"
    lk.damaged_copy(images, folder, "delete", file="images/0000002.jpg")
    with pytest.raises(lk.DataFormatError, match=r"0000002\.jpg.*cannot read sample 2"):
        lk.ImageFolderDataset(folder)[2]


def test_skip_and_count(images, tmp_path):
    folder = tmp_path / "images"
    lk.damaged_copy(images, folder, "truncate", file="images/0000010.jpg", at=0.2)
    damage(folder / "images/0000020.jpg", "truncate", at=0.1)  # a second one, same copy
    ds = lk.ImageFolderDataset(folder, on_error="skip")
    for workers in (0, 2):
        loader = DataLoader(ds, batch_size=16, num_workers=workers,
                            timeout=60 if workers else 0,  # torch: none without workers
                            collate_fn=skip_collate)
        ids, skipped = [], 0
        for b in loader:
            skipped += b["skipped"]
            ids += b["id"].tolist()
        assert skipped == 2
        assert sorted(set(range(len(ds))) - set(ids)) == [10, 20]
    assert ds.skipped == [10, 20]  # the in-process pass (num_workers=0) recorded them


def test_skip_collate_all_skipped():
    assert skip_collate([None, None]) == {"skipped": 2}


def test_bad_labels_csv(tmp_path):
    with pytest.raises(lk.DataFormatError, match="labels.csv: not found"):
        lk.ImageFolderDataset(tmp_path)
    (tmp_path / "labels.csv").write_text("a,b\n1,2\n")
    with pytest.raises(lk.DataFormatError, match="expected columns id,label,file"):
        lk.ImageFolderDataset(tmp_path)


def test_bad_arguments(images):
    with pytest.raises(ValueError, match="on_error"):
        lk.ImageFolderDataset(images, on_error="ignore")
    with pytest.raises(ValueError, match="decoder"):
        lk.ImageFolderDataset(images, decoder="magic")


@pytest.fixture(scope="module")
def augment(tmp_path_factory):
    """Chapter 10's albumentations pipeline, the module its workers import."""
    return chapter_module("10", "augment.py", tmp_path_factory.mktemp("ch10"))


def test_augment_through_workers(images, augment):
    ds = lk.ImageFolderDataset(images, transform=augment.Albumentations(32))
    batch = next(iter(DataLoader(torch.utils.data.Subset(ds, range(16)), batch_size=8,
                                 num_workers=1, timeout=60)))
    out = batch["image"]
    assert out.shape == (8, 3, 32, 32) and out.dtype == torch.float32
    assert -5 < float(out.mean()) < 5  # normalised, not 0-255


def test_augment_draws_differ_across_workers_and_epochs(images, augment):
    """A generator built in the parent must not be replayed by every worker, every epoch."""
    ds = torch.utils.data.Subset(
        lk.ImageFolderDataset(images, transform=augment.Albumentations(32, seed=0)),
        [0] * 8)  # the same image 8 times: any difference comes from the draws
    loader = DataLoader(ds, batch_size=4, num_workers=2, timeout=60)
    epochs = [torch.cat([b["image"] for b in loader]) for _ in range(2)]
    a, b = epochs[0][:4], epochs[0][4:]  # worker 0's batch, worker 1's batch
    assert not torch.equal(a, b), "both workers drew the same augmentations"
    assert not torch.equal(epochs[0], epochs[1]), "the second epoch repeated the first"


def test_torchvision_v2_does_not_load_here_and_says_why():
    """Chapter 10 has no transforms.v2 row because torchvision cannot load next to this kit's
    CPU torch (PyPI's torchvision for torch 2.13.0 links libtorch_cuda.so / libc10_cuda.so).
    When this fails, that reason went away: add transforms.v2 to chapter 10's comparison,
    then turn this into a test of that row."""
    ok, reason = lk.status("torchvision")
    assert not ok, (f"torchvision.transforms.v2 now loads here ({reason}): add it to "
                    "chapter 10's augmentation comparison")
    assert reason.startswith("torchvision.transforms.v2 ")
    assert "does not load here" in reason or "is not installed" in reason
    assert torch.__version__ in reason and "download.pytorch.org/whl/cpu" in reason
