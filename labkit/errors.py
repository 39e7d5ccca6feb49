"""The kit's exceptions: each message names what is wrong and what to do (every chapter)."""

from __future__ import annotations


class LabkitError(Exception):
    """Base class: a problem a learner can fix, explained in the message."""


class ScaleError(LabkitError, ValueError):
    """An unknown scale name (argument or LABKIT_SCALE)."""


class FixtureError(LabkitError):
    """A fixture is missing, corrupted, or its spec is invalid."""


class DataFormatError(LabkitError, ValueError):
    """A data file does not have the size, dtype or shape its reader expects."""


class RecordError(LabkitError):
    """A checkpoint record cannot be written or read."""
