"""Prefetchers: have the next batch ready before the training step asks for it (ch. 09, 10, 13).

* :class:`ThreadPrefetcher` runs any iterable in a background thread and keeps up to
  ``depth`` items queued. Good when the producer releases the GIL (file reads, decoders in
  C, a sleeping or GPU-bound step); it cannot add CPU a busy Python producer lacks.
* :class:`CudaStreamPrefetcher` copies the next batch host-to-device on a side CUDA stream
  (``non_blocking=True``, from the memory the loader pinned with ``pin_memory=True``) while
  the current step runs, and makes the compute stream wait for the copy: the pattern of
  NVIDIA's apex ``data_prefetcher``.
* ``lk.status("cuda")`` says whether the CUDA path can run here and, if not, why.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import Any

from ..errors import LabkitError
from ..optional import check

_END = object()  # the producer's "no more items" marker


class _Raised:
    """An exception from the producer, carried through the queue to the consumer."""

    def __init__(self, exc: BaseException):
        self.exc = exc


_POLL_S = 0.05  # how often a blocked producer checks whether the consumer left


def _put(q: queue.Queue, stop: threading.Event, item) -> bool:
    """Queue ``item`` unless the consumer has left; False when it has."""
    while not stop.is_set():
        try:
            q.put(item, timeout=_POLL_S)
            return True
        except queue.Full:
            continue
    return False


def _produce(iterable: Iterable, q: queue.Queue, stop: threading.Event) -> None:
    # A plain function, not a method: the thread must hold no reference to the consumer's
    # iterator, or an abandoned iterator could never be garbage collected (and stopped).
    it = None
    try:
        it = iter(iterable)
        for item in it:
            if not _put(q, stop, item):
                return
        _put(q, stop, _END)
    except BaseException as e:  # noqa: BLE001 - handed to the consumer, re-raised there
        _put(q, stop, _Raised(e))
    finally:
        del it  # a DataLoader source's workers stop with the pass, unless persistent


class _ThreadIterator(Iterator):
    """One pass of a :class:`ThreadPrefetcher`: a producer thread and a bounded queue."""

    def __init__(self, iterable: Iterable, depth: int, name: str):
        self._q: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._done = False
        # A daemon thread: a consumer that never closes must not keep the interpreter alive.
        self._thread = threading.Thread(target=_produce, args=(iterable, self._q, self._stop),
                                        daemon=True, name=name)
        self._thread.start()

    def __next__(self):
        if self._done:
            raise StopIteration
        item = self._q.get()
        if item is _END:
            self._finish()
            raise StopIteration
        if isinstance(item, _Raised):
            self._finish()
            raise item.exc
        return item

    def _finish(self) -> None:
        self._done = True
        self._thread.join()

    def close(self) -> None:
        """Stop the producer and wait for it (on early exit, and when the iterator is collected)."""
        if self._done:
            return
        self._done = True
        self._stop.set()
        while True:  # drain, so a producer blocked on a full queue sees the stop at once
            try:
                self._q.get_nowait()
            except queue.Empty:
                break
        self._thread.join()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


class ThreadPrefetcher:
    """Iterate ``iterable`` in a background thread, up to ``depth`` items ahead (chapter 09).

    Re-iterable: each ``iter()`` starts a fresh thread over ``iter(iterable)``, so
    ``lk.measure`` can time it over several passes. Order is preserved, every item comes
    exactly once, an exception in the producer is re-raised in the consumer, and leaving
    early (``break``, ``it.close()``, ``del it``) stops the thread.
    """

    def __init__(self, iterable: Iterable, depth: int = 2):
        if int(depth) < 1:
            raise ValueError(f"depth must be at least 1, not {depth!r}")
        self.iterable, self.depth = iterable, int(depth)
        self._passes = 0

    def __iter__(self) -> _ThreadIterator:
        self._passes += 1
        return _ThreadIterator(self.iterable, self.depth,
                               name=f"labkit-prefetch-{id(self):x}-{self._passes}")

    def __len__(self) -> int:
        return len(self.iterable)  # type: ignore[arg-type]


# -- CUDA ------------------------------------------------------------------------------------

@check("cuda")
def _cuda_status(device: Any = None) -> tuple[bool, str]:
    """``(True, "...")`` if CUDA work can run here, else ``(False, the reason in words)``.

    Introduced in chapter 09; chapter 10 uses it for its GPU decode paths.
    """
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure means "no CUDA here"
        return False, f"torch cannot be imported ({type(e).__name__}: {e})"
    if torch.version.cuda is None:
        return False, (f"torch {torch.__version__} is a CPU-only build (torch.version.cuda is "
                       "None): no CUDA streams, no pinned memory to copy from")
    if not torch.cuda.is_available():
        return False, (f"torch {torch.__version__} was built for CUDA {torch.version.cuda}, "
                       "but no CUDA device is visible (torch.cuda.is_available() is False)")
    try:  # a malformed or absent device ("cuda:7") is a reason, not an exception
        dev = torch.device(device if device is not None else "cuda")
        if dev.type != "cuda":
            return False, f"device {dev} is not a CUDA device"
        name = torch.cuda.get_device_name(dev)
    except Exception as e:  # noqa: BLE001
        return False, f"device {device!r} cannot be used ({type(e).__name__}: {e})"
    return True, f"CUDA {torch.version.cuda}: {name}"


def to_device(batch, device, non_blocking: bool = True, pin: bool = True):
    """``batch`` (tensors in tuples, lists, dicts) moved to ``device``, pinning CPU tensors.

    A ``non_blocking`` copy is only asynchronous from pinned (page-locked) host memory; from
    ordinary memory the driver stages it through a pinned buffer synchronously.
    """
    import torch

    if isinstance(batch, torch.Tensor):
        if pin and batch.device.type == "cpu" and not batch.is_pinned():
            batch = batch.pin_memory()
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, dict):
        return {k: to_device(v, device, non_blocking, pin) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        moved = [to_device(v, device, non_blocking, pin) for v in batch]
        return type(batch)(moved) if isinstance(batch, list) else tuple(moved)
    return batch


def _record_stream(batch, stream) -> None:
    """Tell the caching allocator ``batch`` is used on ``stream`` (so it is not reused early)."""
    import torch

    if isinstance(batch, torch.Tensor):
        if batch.device.type == "cuda":
            batch.record_stream(stream)
    elif isinstance(batch, dict):
        for v in batch.values():
            _record_stream(v, stream)
    elif isinstance(batch, (list, tuple)):
        for v in batch:
            _record_stream(v, stream)


class CudaStreamPrefetcher:
    """Copy batch ``i+1`` to the GPU on a side stream while the step computes on batch ``i``.

    Introduced in chapter 09. Each batch from ``loader`` is copied with ``non_blocking=True``
    on a dedicated stream; before a batch is handed out, the current (compute) stream waits
    for that copy, and the batch's memory is recorded on the compute stream. Give it a
    loader with ``pin_memory=True``: the DataLoader's pin thread pins beside the loop, and
    only a copy from pinned memory is asynchronous. This class does not pin in the loop's
    thread (``t.pin_memory().to(device, non_blocking=True)`` there is an extra copy the loop
    waits for: up to 2x slower than a plain ``.to(device)``, PyTorch's tutorial
    "A guide on good usage of non_blocking and pin_memory()"). Without CUDA the constructor
    raises :class:`~labkit.LabkitError` with ``lk.status("cuda")``'s reason.
    """

    def __init__(self, loader: Iterable, device: Any = "cuda"):
        ok, reason = _cuda_status(device)
        if not ok:
            raise LabkitError(f"CudaStreamPrefetcher cannot run here: {reason}")
        import torch

        self.loader, self.device = loader, torch.device(device)
        # One side stream for the prefetcher's life, as apex's data_prefetcher: the caching
        # allocator reuses a freed block only on the stream it was allocated on, and
        # torch.cuda.Stream() hands out a pool's streams round-robin, so a stream per pass
        # would cudaMalloc each pass's first batches afresh (review 09-F2).
        self.stream = torch.cuda.Stream(self.device)

    def __len__(self) -> int:
        return len(self.loader)  # type: ignore[arg-type]

    def __iter__(self):
        import torch

        stream = self.stream
        it = iter(self.loader)
        try:
            def load():
                try:
                    host = next(it)
                except StopIteration:
                    return _END
                with torch.cuda.stream(stream):
                    # no pin here: the loader's pin thread did it (pin_memory=True)
                    return to_device(host, self.device, non_blocking=True, pin=False)

            nxt = load()
            while nxt is not _END:
                compute = torch.cuda.current_stream(self.device)
                compute.wait_stream(stream)  # the copy finishes before the step reads it
                batch = nxt
                _record_stream(batch, compute)
                nxt = load()  # starts copying the next batch while the caller computes
                yield batch
        finally:
            it = None  # the loader's workers stop here, unless they are persistent
