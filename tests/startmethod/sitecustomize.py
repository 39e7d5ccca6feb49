"""Force multiprocessing's default start method in every Python process of a test run.

Issue 22: learners meet ``spawn`` (macOS, Windows) and ``forkserver`` (Linux from Python
3.14), while this machine's default is ``fork``. ``make test START_METHODS=spawn,forkserver``
collects every chapter once more per method (notebooks/conftest.py), its kernel started with
this folder on ``PYTHONPATH`` and ``LABKIT_START_METHOD`` set, so the kernel, and every
process it starts, take that method as their default, as they would on those machines.
Nothing happens without the variable.

``LABKIT_FORKSERVER_PRELOAD=torch`` (a comma-separated module list; set for the forkserver
copies) also imports those modules once in the fork server, with multiprocessing's public
``set_forkserver_preload``: each worker is then forked with torch already imported instead
of importing it (here about 1.4 s per start of a 2-worker loader, 0.05 s preloaded). It is
what a performance engineer on Python 3.14 sets (Ray's training-ingest benchmark preloads for
this reason); without it each forkserver worker imports torch itself, as a spawn worker
does, which the spawn copies pay.
"""

import os

_method = os.environ.get("LABKIT_START_METHOD")
if _method:
    import multiprocessing

    multiprocessing.set_start_method(_method, force=True)
    _preload = os.environ.get("LABKIT_FORKSERVER_PRELOAD")
    if _method == "forkserver" and _preload:
        multiprocessing.set_forkserver_preload(_preload.split(","))

if os.environ.get("LABKIT_HIDE_LINUX", "") not in ("", "0"):
    import collections

    import psutil

    for _name in ("posix_fadvise", "sched_getaffinity", "sched_setaffinity"):
        if hasattr(os, _name):
            delattr(os, _name)
    _pfullmem = collections.namedtuple("pfullmem", "rss vms uss")   # macOS has no pss
    _full = psutil.Process.memory_full_info

    def _memory_full_info(self):
        m = _full(self)
        return _pfullmem(m.rss, m.vms, m.uss)

    psutil.Process.memory_full_info = _memory_full_info
