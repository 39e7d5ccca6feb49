"""Loaders: what a batch holds, leftover worker processes (ch. 01, 09).

Its modules' names are for labkit and tests (``lk.worker_processes`` is the public one).
"""

__all__: list[str] = []
