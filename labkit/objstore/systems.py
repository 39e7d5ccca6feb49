"""MosaicML Streaming, LitData and Ray Data: may they run here (chapters 14, 16).

Next to the kit's CPU-only torch none installs plainly (PyPI's torchvision is built for a
CUDA torch and fails at import, litdata requires it, mosaicml-streaming imports it and pins
numpy); the recipe that works is ``.ci/install-objstore-systems``. ``lk.status`` knows them
(``"mosaicml_streaming"``, ``"litdata"``, ``"ray_data"``). The one workaround, a stand-in
``torchvision`` that exists only while ``import streaming`` runs, is :func:`import_streaming`;
a test fails when it stops being needed or stops working.
"""

from __future__ import annotations

import importlib
import sys
import types

from ..optional import check, library_status
from ..remote.leftovers import scoped

RECIPE = ".ci/install-objstore-systems (pip --no-deps plus their runtime needs)"


def _stand_in_torchvision() -> dict[str, types.ModuleType]:
    """The names ``streaming.vision`` takes from torchvision at import, unusable on purpose."""
    def unavailable(*args, **kwargs):
        raise RuntimeError("torchvision is a stand-in here (labkit.objstore.systems): "
                           "MosaicML Streaming's vision datasets need a real torchvision")

    root, ds, tf, fn = (types.ModuleType(n) for n in (
        "torchvision", "torchvision.datasets", "torchvision.transforms",
        "torchvision.transforms.functional"))
    ds.VisionDataset = type("VisionDataset", (), {"__init__": unavailable})
    ds.CIFAR10 = type("CIFAR10", (), {"__init__": unavailable})
    fn.to_tensor = unavailable
    root.datasets, root.transforms, tf.functional = ds, tf, fn
    return {m.__name__: m for m in (root, ds, tf, fn)}


def import_streaming(stand_in: bool | None = None):
    """``import streaming`` (MosaicML Streaming), past its import of torchvision.

    ``streaming/__init__.py`` imports ``streaming.vision``, which imports torchvision at
    module level. Without a torchvision that imports, a stand-in is put in ``sys.modules``
    for the import only and taken out again, so every later probe for torchvision (kornia,
    albumentations, datasets) still finds none.
    """
    if "streaming" in sys.modules:
        return sys.modules["streaming"]
    if stand_in is None:
        stand_in = not library_status("torchvision", install="")[0]
    if not stand_in:
        return importlib.import_module("streaming")
    import transformers.feature_extraction_utils  # noqa: F401 - before the stand-in is in
    import transformers.tokenization_utils_base  # noqa: F401

    with scoped(sys.modules, _stand_in_torchvision()):
        return importlib.import_module("streaming")


@check("mosaicml_streaming")
def _mosaic() -> tuple[bool, str]:
    return library_status("mosaicml-streaming", "streaming", install=RECIPE,
                          importer=lambda _: import_streaming())


@check("litdata")
def _litdata() -> tuple[bool, str]:
    return library_status("litdata", install=RECIPE)


@check("ray_data")
def _ray() -> tuple[bool, str]:
    return library_status("ray", "ray.data", install=RECIPE)
