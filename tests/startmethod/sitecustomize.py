"""Force multiprocessing's default start method in every Python process of a test run.

Issue 22: learners meet ``spawn`` (macOS, Windows) and ``forkserver`` (Linux from Python
3.14), while this machine's default is ``fork``. ``make test-start-methods`` puts this folder
on ``PYTHONPATH`` with ``LABKIT_START_METHOD=spawn`` (then ``forkserver``), so the notebook
kernels nbval starts, and every process they start, take that method as their default, as
they would on those machines. Nothing happens without the variable.
"""

import os

_method = os.environ.get("LABKIT_START_METHOD")
if _method:
    import multiprocessing

    multiprocessing.set_start_method(_method, force=True)
