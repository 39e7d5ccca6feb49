"""Augmentation: one pipeline in albumentations, torch, kornia; reseeded per worker (ch. 10, 16)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from ..optional import check, library_status

#: ImageNet mean and std (0-255 scale): what the pipelines normalise with.
MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)


# -- augmentation ---------------------------------------------------------------------------

AUGMENT_LIBRARIES = ("albumentations", "torch", "kornia")


def _reseed_per_worker(seed: int, reseed):
    """A check to call at each sample: reseeds once in every new DataLoader worker process.

    A generator built in the parent is copied into every forked worker, so without this every
    worker draws the same crops, and non-persistent workers repeat them every epoch.
    ``get_worker_info().seed`` differs per worker and per epoch (and follows
    ``torch.manual_seed``), so ``seed + info.seed`` gives each its own reproducible stream.
    In the main process nothing changes: the build-time seed holds.
    """
    from torch.utils.data import get_worker_info

    seen = [None]

    def check() -> None:
        info = get_worker_info()
        key = None if info is None else info.seed
        if key != seen[0]:
            seen[0] = key
            if key is not None:
                reseed((seed + key) % 2**32)

    return check


class _PerWorkerReseed:
    """:func:`_reseed_per_worker` as an object: picklable, so spawn and forkserver workers can
    receive it (a closure cannot be pickled)."""

    def __init__(self, seed: int, reseed) -> None:
        self.seed, self.reseed, self.seen = seed, reseed, None

    def __call__(self) -> None:
        from torch.utils.data import get_worker_info

        info = get_worker_info()
        key = None if info is None else info.seed
        if key != self.seen:
            self.seen = key
            if key is not None:
                self.reseed((self.seed + key) % 2**32)


class _AlbumentationsAugment:
    """The albumentations pipeline as a picklable callable (spawn / forkserver workers)."""

    def __init__(self, pipe, seed: int) -> None:
        self.pipe, self.reseed = pipe, _PerWorkerReseed(seed, pipe.set_random_seed)

    def __call__(self, img: np.ndarray) -> torch.Tensor:
        self.reseed()
        return self.pipe(image=img)["image"]


def _albumentations(size: int, seed: int):
    import albumentations as A
    from albumentations.pytorch import ToTensorV2

    pipe = A.Compose([
        A.RandomResizedCrop(size=(size, size), scale=(0.5, 1.0)),
        A.HorizontalFlip(p=0.5),
        A.RandomBrightnessContrast(brightness_limit=0.2, contrast_limit=0.2, p=1.0),
        A.Normalize(mean=[m / 255 for m in MEAN], std=[s / 255 for s in STD]),
        ToTensorV2(),
    ], seed=seed)
    return _AlbumentationsAugment(pipe, seed)


def _torch_native(size: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    mean = torch.tensor(MEAN).view(3, 1, 1)
    std = torch.tensor(STD).view(3, 1, 1)
    reseed = _reseed_per_worker(seed, gen.manual_seed)

    def augment(img: np.ndarray) -> torch.Tensor:
        reseed()
        x = torch.from_numpy(np.ascontiguousarray(img)).permute(2, 0, 1).float()
        h, w = x.shape[1:]
        area = float(torch.empty(1).uniform_(0.5, 1.0, generator=gen)) * h * w
        side = max(1, min(h, w, int(round(area ** 0.5))))
        top = int(torch.randint(0, h - side + 1, (1,), generator=gen))
        left = int(torch.randint(0, w - side + 1, (1,), generator=gen))
        x = x[:, top:top + side, left:left + side]
        x = torch.nn.functional.interpolate(x[None], size=(size, size), mode="bilinear",
                                            align_corners=False)[0]
        if torch.rand(1, generator=gen) < 0.5:
            x = x.flip(-1)
        b, c = (torch.empty(2).uniform_(-0.2, 0.2, generator=gen)).tolist()
        x = (x * (1 + c) + 255 * b).clamp_(0, 255)
        return (x - mean) / std

    return augment


def _kornia(size: int, seed: int):
    import kornia.augmentation as K

    # kornia draws from torch's global generator (which DataLoader seeds per worker); `seed`
    # is not applied here, because reseeding the global generator would change every other
    # draw in the caller's program
    del seed
    pipe = K.AugmentationSequential(
        K.RandomResizedCrop((size, size), scale=(0.5, 1.0)),
        K.RandomHorizontalFlip(p=0.5),
        K.ColorJitter(brightness=0.2, contrast=0.2, p=1.0),
        K.Normalize(mean=torch.tensor(MEAN) / 255, std=torch.tensor(STD) / 255),
    )

    def augment(batch: torch.Tensor) -> torch.Tensor:
        # kornia works on float batches in [0, 1], on whatever device the batch is on
        return pipe(batch.float() / 255)

    return augment


@check("torchvision")
def _torchvision_status() -> tuple[bool, str]:
    """``(True, version)`` if ``torchvision.transforms.v2`` imports here, else why not.

    On this kit's CPU torch it does not: PyPI's torchvision for torch 2.13.0 (0.28.0) links
    its operators against ``libtorch_cuda.so`` and ``libc10_cuda.so``, which a CPU build of
    torch does not ship, so ``import torchvision`` fails with "operator torchvision::nms does
    not exist"; the kit does not install it. A torchvision from the same index as the torch
    (PyTorch's CPU or CUDA wheel index) loads. Chapter 10 prints this reason instead of a
    transforms.v2 row.
    """
    return library_status("torchvision", "torchvision", "torchvision.transforms.v2",
                          label="torchvision.transforms.v2", install=torchvision_install())


def torchvision_install() -> str:
    """What to do when torchvision does not load next to this torch (chapters 10, 16)."""
    build = "CPU" if torch.version.cuda is None else f"CUDA {torch.version.cuda}"
    return (f"torch is {torch.__version__} ({build} build); PyPI's torchvision for it links "
            "libtorch_cuda.so and libc10_cuda.so, so next to a CPU torch its import fails "
            "('operator torchvision::nms does not exist'): install torchvision from the index "
            "your torch came from (e.g. https://download.pytorch.org/whl/cpu)")


def make_augment(library: str, size: int, seed: int = 0) -> Callable:
    """The same augmentation pipeline built with ``library`` (one of AUGMENT_LIBRARIES).

    RandomResizedCrop to ``size`` (scale 0.5-1), horizontal flip (p=0.5), brightness and
    contrast +-20 %, ImageNet normalisation, float32 CHW out. ``albumentations`` and
    ``torch`` work per sample on an HxWx3 uint8 array (use as a dataset ``transform``);
    ``kornia`` works per *batch* on a uint8 NCHW tensor, on CPU or GPU (apply after
    collate, e.g. in the training loop). The callable's ``per`` attribute says which.

    ``seed`` seeds the per-sample pipelines; in each DataLoader worker they are reseeded from
    it and the worker's own seed, so workers draw different augmentations and so do epochs.
    kornia draws from torch's global generator (``torch.manual_seed``) and ignores ``seed``.
    """
    builders = {"albumentations": _albumentations, "torch": _torch_native, "kornia": _kornia}
    if library not in builders:
        raise ValueError(f"library={library!r}: choose one of {', '.join(AUGMENT_LIBRARIES)}")
    fn = builders[library](int(size), int(seed))
    fn.per = "batch" if library == "kornia" else "sample"
    fn.library = library
    return fn
