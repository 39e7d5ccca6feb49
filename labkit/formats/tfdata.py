"""The other ecosystem's loader: TFRecord -> tf.data -> numpy -> torch, optional (chapter 12b).

``tensorflow-cpu`` is large, so it is the optional ``tfdata`` extra; ``lk.status("tfdata")``
says whether it is there and, if not, exactly why. TensorFlow runs in a child process
(:func:`tfdata_measure`): it and the ``tfrecord`` package both register the
``tensorflow.Example`` protobuf messages in protobuf's default pool, and whichever is
imported second fails (``TypeError: ... duplicate symbol 'tensorflow.BytesList'``,
protobuf 7, TensorFlow 2.21, tfrecord 1.14).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ..optional import check, library_status

_CHILD = Path(__file__).with_name("_tfdata_child.py")


@check("tfdata")
def _tfdata_status() -> tuple[bool, str]:
    """``(True, version)`` if TensorFlow is installed for this interpreter, else
    ``(False, the reason)``. Nothing is imported: see the module docstring for why."""
    return library_status("tensorflow-cpu", "tensorflow", label="tensorflow", load=False,
                          install="tf.data is the optional extra: pip install "
                                  "'labkit[tfdata]' (tensorflow-cpu, ~600 MB)")


@dataclass(frozen=True)
class TfDataResult:
    """What the tf.data child measured: rates per pass, samples, and the rows' sha256."""

    tensorflow: str
    passes: tuple[float, ...]
    samples: int
    unique: int
    first_s: float
    sha256: str

    @property
    def samples_per_s(self) -> float:
        return statistics.median(self.passes)

    def __str__(self) -> str:
        return (f"tf.data (tensorflow {self.tensorflow}): {self.samples_per_s:,.0f} samples/s "
                f"({min(self.passes):,.0f}-{max(self.passes):,.0f} over {len(self.passes)} "
                f"passes), first batch {self.first_s * 1e3:,.0f} ms, {self.samples} samples, "
                f"{self.unique} unique")


def tfdata_measure(paths, *, batch_size: int = 64, passes: int = 3, warmup: int = 1,
                   shuffle: int = 0, timeout: float = 300.0) -> TfDataResult:
    """Read TFRecord files written by :func:`~labkit.write_tfrecord` through tf.data
    (``interleave``, parallel ``map``, ``batch``, ``prefetch``, all ``AUTOTUNE``) into torch
    tensors, in a child process; returns its figures.

    Raises ``RuntimeError`` with the reason when TensorFlow is not installed or the child
    fails (its last lines of stderr included).
    """
    ok, why = _tfdata_status()
    if not ok:
        raise RuntimeError(why)
    files = [str(p) for p in (paths if isinstance(paths, (list, tuple)) else [paths])]
    spec = {"files": files, "batch_size": batch_size, "passes": passes, "warmup": warmup,
            "shuffle": shuffle}
    # PYTHONDONTWRITEBYTECODE: AutoGraph writes the code it generates for tf.function to a
    # module in the temp folder and imports it; the module goes, but the __pycache__ Python
    # writes beside it would stay in /tmp
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONDONTWRITEBYTECODE": "1"}
    r = subprocess.run([sys.executable, str(_CHILD), json.dumps(spec)], capture_output=True,
                       text=True, timeout=timeout, env=env)
    if r.returncode != 0:
        tail = "\n".join(r.stderr.strip().splitlines()[-5:])
        raise RuntimeError(f"the tf.data child failed (exit {r.returncode}):\n{tail}")
    out = json.loads(r.stdout.strip().splitlines()[-1])
    return TfDataResult(out["tensorflow"], tuple(out["samples_per_s"]), out["samples"],
                        out["unique"], out["first_s"], out["sha256"])
