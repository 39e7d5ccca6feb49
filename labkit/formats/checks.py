"""``lk.status`` for chapter 12b's optional libraries: Lance, ArrayRecord, safetensors, tf.data.

``load=False``: importing lance makes every later ``fork()`` unsafe; TensorFlow cannot share a
process with the ``tfrecord`` package (both register the ``tensorflow.Example`` messages).
"""

from __future__ import annotations

from ..optional import check, library_status

_EXTRA = 'pip install -e ".[moreformats]"'


@check("lance")
def _lance_status() -> tuple[bool, str]:
    return library_status("pylance", "lance", label="pylance", load=False,
                          install=f"{_EXTRA} or pip install pylance")


@check("array_record")
def _array_record_status() -> tuple[bool, str]:
    return library_status("array-record", "array_record.python.array_record_module",
                          install=f"{_EXTRA} or pip install array-record")


@check("safetensors")
def _safetensors_status() -> tuple[bool, str]:
    return library_status("safetensors", install="pip install safetensors")


@check("tfdata")
def _tfdata_status() -> tuple[bool, str]:
    return library_status("tensorflow-cpu", "tensorflow", label="tensorflow", load=False,
                          install="tf.data is the optional extra: pip install "
                                  "'labkit[tfdata]' (tensorflow-cpu, ~600 MB)")
