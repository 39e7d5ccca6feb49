"""SPDL's thread-based pipeline on the clip task, and its failures counted, not lost (ch. 15).

SPDL (Meta's "Scalable and Performant Data Loading") runs decode stages in a thread pool of
one process: FFmpeg releases the GIL while it decodes, so threads scale without worker
processes. Its pipeline treats a failing task as something to log and drop (``build``'s
``max_failures=-1`` default): a clip whose file is broken, or every clip when FFmpeg's
libraries are missing, just does not arrive, and the loop sees fewer batches, or none.
:func:`spdl_clips` runs the same pipeline with each task's failure caught and counted, and
raises them, naming each file, unless asked to skip and count.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

import torch

from ..optional import status
from .decoders import MediaError, _check_source, _name, _why


def spdl_decode_clip(source, indices) -> torch.Tensor:
    """The frames at ``indices`` with SPDL (demux, ``sample_decode_video``, convert):
    ``uint8 (N, 3, H, W)``; a failure is a :class:`MediaError` naming the file."""
    import spdl.io

    _check_source(source)
    try:
        packets = spdl.io.demux_video(source if isinstance(source, bytes) else str(source))
        frames = spdl.io.sample_decode_video(packets, [int(i) for i in indices])
        hwc = spdl.io.to_torch(spdl.io.convert_frames(frames))
    except Exception as e:  # noqa: BLE001 - SPDL raises RuntimeError/IndexError
        raise MediaError(f"{_name(source)}: SPDL cannot decode frames "
                         f"{list(indices)[:1]}...: {_why(e)}") from None
    return hwc.permute(0, 3, 1, 2).contiguous()


@dataclass
class SpdlRun:
    """What an SPDL pipeline delivered and what failed (``failures``: one line each)."""

    asked: int
    delivered: list = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    logged: int = 0  # error records SPDL wrote to its log (the only trace without counting)

    @property
    def lost(self) -> int:
        return self.asked - len(self.delivered)

    def __str__(self) -> str:
        return (f"asked {self.asked}, delivered {len(self.delivered)}, lost {self.lost}, "
                f"failures counted {len(self.failures)}, errors in SPDL's log {self.logged}")


class _CountLog(logging.Handler):
    def __init__(self):
        super().__init__(logging.ERROR)
        self.count = 0

    def emit(self, record):
        self.count += 1


def spdl_clips(jobs, *, concurrency: int = 2, num_threads: int = 2, counted: bool = True,
               skip_errors: bool = False, quiet: bool = True,
               max_failures: int = -1) -> SpdlRun:
    """Decode clips ``jobs`` (``(clip, source)`` pairs) in SPDL's thread pipeline.

    Args:
        jobs: ``(clip, source)`` pairs; ``clip`` has ``id`` and ``indices``
            (:class:`~labkit.media.clips.Clip`), ``source`` a file or its bytes.
        concurrency: decode tasks in flight; num_threads: the pipeline's thread pool.
        counted: catch and count each task's failure (the kit's way). ``False`` runs SPDL
            as it comes: a failing task is logged and dropped.
        skip_errors: with ``counted``, return the failures instead of raising them.
        quiet: keep SPDL's logged tracebacks out of the output (they are still counted in
            ``logged``).
        max_failures: SPDL's own knob, passed to ``build``: ``-1`` (its default) never
            halts, ``0`` halts at the first failure (``PipelineFailure`` when iterated), ``n``
            after more than ``n``. It halts; it does not count or name the files.

    Returns:
        an :class:`SpdlRun`; ``delivered`` holds ``{"id", "frames"}`` dicts.

    Raises:
        MediaError: with ``counted`` and not ``skip_errors``, when any clip failed (the
            message counts them and names each file); also when SPDL is not usable here.
    """
    ok, reason = status("spdl")
    if not ok:
        raise MediaError(f"SPDL cannot run here: {reason}")
    from spdl.pipeline import PipelineBuilder

    jobs = list(jobs)
    run = SpdlRun(asked=len(jobs))
    lock = threading.Lock()

    def decode(job):
        clip, source = job
        return {"id": clip.id, "frames": spdl_decode_clip(source, clip.indices)}

    def decode_counted(job):
        try:
            return decode(job)
        except Exception as e:  # noqa: BLE001 - every failure is counted, whatever it is
            with lock:
                run.failures.append(f"clip {job[0].id}: {e}")
            return None  # SPDL drops a None result: the failure is in run.failures

    log = logging.getLogger("spdl")
    counter, propagate = _CountLog(), log.propagate
    log.addHandler(counter)
    log.propagate = not quiet
    try:
        pipe = (PipelineBuilder().add_source(jobs)
                .pipe(decode_counted if counted else decode, concurrency=concurrency)
                .add_sink(2 * concurrency).build(num_threads=num_threads,
                                                         max_failures=max_failures))
        with pipe.auto_stop():
            run.delivered = list(pipe)
    finally:
        log.removeHandler(counter)
        log.propagate = propagate
    run.logged = counter.count
    if counted and run.failures and not skip_errors:
        shown = "\n  ".join(run.failures[:5])
        raise MediaError(f"{len(run.failures)} of {run.asked} clips failed in SPDL's "
                         f"pipeline:\n  {shown}")
    return run
