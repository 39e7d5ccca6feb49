"""JPEG images: decoders, an image-folder dataset, augmentation pipelines (chapter 10).

* :func:`decode_jpeg` decodes bytes to an RGB ``uint8`` HxWx3 array with one of
  :data:`DECODERS`: ``pil`` (Pillow, libjpeg-turbo inside), ``opencv`` (cv2.imdecode) or
  ``simplejpeg`` (a thin libjpeg-turbo binding, no intermediate image object).
* :class:`ImageFolderDataset` reads the ``images`` fixture (``labels.csv``: id, label,
  file). A corrupt file raises :class:`~labkit.DataFormatError` naming it, or with
  ``on_error="skip"`` the sample is dropped by :func:`skip_collate` and counted.
* :func:`make_augment` builds the same augmentation (random resized crop, flip, brightness /
  contrast, normalise) with albumentations, plain torch, or kornia.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset, default_collate

from ..errors import DataFormatError

#: ImageNet mean and std (0-255 scale): what the pipelines normalise with.
MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)


# -- decoders -------------------------------------------------------------------------------

def _pil(data: bytes) -> np.ndarray:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        return np.array(im.convert("RGB"))  # writable, like the other decoders


def _opencv(data: bytes) -> np.ndarray:
    import cv2

    bgr = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    if bgr is None:  # OpenCV signals a bad image by returning None, not raising
        raise ValueError("cv2.imdecode could not decode the data")
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


def _simplejpeg(data: bytes) -> np.ndarray:
    import simplejpeg

    return simplejpeg.decode_jpeg(data, colorspace="RGB")


DECODERS: dict[str, Callable[[bytes], np.ndarray]] = {
    "pil": _pil, "opencv": _opencv, "simplejpeg": _simplejpeg}


_cv_pid: list[int] = [0]  # the process that last set OpenCV's thread count


def _opencv_single_thread() -> None:
    # OpenCV starts its own thread pool per process; inside DataLoader workers that
    # oversubscribes the cores the workers already fill. Once per process (workers fork).
    if _cv_pid[0] == os.getpid():
        return
    _cv_pid[0] = os.getpid()
    try:
        import cv2

        cv2.setNumThreads(1)
    except ImportError:
        pass


def available_decoders() -> list[str]:
    """The names in :data:`DECODERS` whose library imports here."""
    mods = {"pil": "PIL.Image", "opencv": "cv2", "simplejpeg": "simplejpeg"}
    out = []
    for name, mod in mods.items():
        try:
            __import__(mod)
            out.append(name)
        except Exception:  # noqa: BLE001 - a broken install is "not available"
            pass
    return out


def decode_jpeg(data: bytes, decoder: str = "pil") -> np.ndarray:
    """Decode JPEG ``data`` to an RGB uint8 array (H, W, 3) with the named decoder."""
    try:
        fn = DECODERS[decoder]
    except KeyError:
        raise ValueError(f"decoder={decoder!r}: choose one of {', '.join(DECODERS)}") from None
    if decoder == "opencv":
        _opencv_single_thread()
    img = fn(data)
    if img.ndim != 3 or img.shape[2] != 3:
        raise ValueError(f"decoded to shape {img.shape}, expected (H, W, 3)")
    return img


# -- the dataset ----------------------------------------------------------------------------

def read_labels(folder: Path) -> list[tuple[int, int, str]]:
    """``(id, label, relative file)`` rows of ``folder/labels.csv``, checked."""
    path = folder / "labels.csv"
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except FileNotFoundError:
        raise DataFormatError(f"{path}: not found; an image folder needs labels.csv "
                              "(id,label,file)") from None
    if not rows or set(rows[0]) != {"id", "label", "file"}:
        cols = sorted(rows[0]) if rows else []
        raise DataFormatError(f"{path}: expected columns id,label,file, found {cols}")
    return [(int(r["id"]), int(r["label"]), r["file"]) for r in rows]


class ImageFolderDataset(Dataset):
    """The ``images`` fixture as a map-style dataset: ``{"image", "label", "id"}`` (ch. 10).

    Args:
        fixture_or_folder: a :class:`~labkit.Fixture` or a folder with ``labels.csv``.
        decoder: a name in :data:`DECODERS`.
        transform: called on the decoded HxWx3 uint8 array; default: a CHW uint8 tensor.
        on_error: ``"raise"`` (default): a file that cannot be read or decoded raises
            :class:`~labkit.DataFormatError` naming it; ``"skip"``: the sample comes back
            as ``None`` (use :func:`skip_collate`, which drops it and counts it in the
            batch's ``"skipped"``); skipped ids of this process are in :attr:`skipped`.
    """

    def __init__(self, fixture_or_folder, decoder: str = "pil",
                 transform: Callable | None = None, on_error: str = "raise"):
        if decoder not in DECODERS:
            raise ValueError(f"decoder={decoder!r}: choose one of {', '.join(DECODERS)}")
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', not {on_error!r}")
        self.folder = Path(getattr(fixture_or_folder, "path", fixture_or_folder))
        self.rows = read_labels(self.folder)
        self.decoder, self.transform, self.on_error = decoder, transform, on_error
        self.skipped: list[int] = []

    def __len__(self) -> int:
        return len(self.rows)

    def path(self, i: int) -> Path:
        return self.folder / self.rows[i][2]

    def read(self, i: int) -> bytes:
        """The file's bytes (the read stage, on its own for the stage breakdown)."""
        with open(self.path(i), "rb") as f:
            return f.read()

    def decode(self, i: int, data: bytes) -> np.ndarray:
        """Decode sample ``i``'s bytes; a failure names the file."""
        try:
            return decode_jpeg(data, self.decoder)
        except Exception as e:  # each decoder fails its own way: OSError, ValueError, ...
            raise DataFormatError(
                f"{self.path(i)}: sample {self.rows[i][0]} is not a decodable JPEG "
                f"({self.decoder}: {type(e).__name__}: {e})") from None

    def __getitem__(self, i: int):
        sample_id, label, _ = self.rows[i]
        try:
            img = self.decode(i, self.read(i))
        except (DataFormatError, OSError) as e:
            if self.on_error == "raise":
                if isinstance(e, DataFormatError):
                    raise
                raise DataFormatError(f"{self.path(i)}: cannot read sample {sample_id} "
                                      f"({e})") from None
            self.skipped.append(sample_id)
            return None
        x = self.transform(img) if self.transform else torch.from_numpy(
            np.ascontiguousarray(img.transpose(2, 0, 1)))
        return {"image": x, "label": label, "id": sample_id}


def skip_collate(samples: list):
    """Collate, dropping ``None`` samples and counting them in ``batch["skipped"]``.

    A worker cannot tell the main process about a skipped sample except through the
    batch, so the count travels with it. A batch whose every sample was skipped is
    ``{"skipped": n}`` alone.
    """
    kept = [s for s in samples if s is not None]
    skipped = len(samples) - len(kept)
    if not kept:
        return {"skipped": skipped}
    batch = default_collate(kept)
    batch["skipped"] = skipped
    return batch


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
    reseed = _reseed_per_worker(seed, pipe.set_random_seed)

    def augment(img: np.ndarray) -> torch.Tensor:
        reseed()
        return pipe(image=img)["image"]

    return augment


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


def file_bytes(paths) -> list[bytes]:
    """Read each file in ``paths`` (the encoded JPEGs a decode benchmark starts from)."""
    out = []
    for p in paths:
        with open(os.fspath(p), "rb") as f:
            out.append(f.read())
    return out
