"""Where the kit keeps things: fixture specs, data, records, runs, notebooks (every chapter).

Every location can be moved with an environment variable, so a workshop can put data on
a fast local disk and CI can point records at a scratch folder.
"""

from __future__ import annotations

import os
from pathlib import Path

#: The repository checkout the package was imported from (editable install).
REPO_ROOT = Path(__file__).resolve().parent.parent


def _env_path(var: str, default: Path) -> Path:
    value = os.environ.get(var)
    return Path(value).expanduser().resolve() if value else default


def specs_file() -> Path:
    """The fixture spec file (``data_fixtures/fixtures.toml``; LABKIT_SPECS overrides)."""
    return _env_path("LABKIT_SPECS", REPO_ROOT / "data_fixtures" / "fixtures.toml")


def data_dir() -> Path:
    """Root of the generated fixture cache (git-ignored; LABKIT_DATA overrides)."""
    return _env_path("LABKIT_DATA", REPO_ROOT / "data_fixtures" / "cache")


def records_dir() -> Path:
    """Where checkpoint records are written (git-ignored; LABKIT_RECORDS overrides)."""
    return _env_path("LABKIT_RECORDS", REPO_ROOT / "records")


def notebooks_dir() -> Path:
    """The chapters (LABKIT_NOTEBOOKS overrides, for tests)."""
    return _env_path("LABKIT_NOTEBOOKS", REPO_ROOT / "notebooks")


def notebook_path(stem: str) -> str:
    """A notebook's path under :func:`notebooks_dir`, without ``.ipynb``: a chapter's stem
    (``14_object_stores``) as it is, a "Going further" one (``14b_...``: a letter after the
    number) under ``further/``."""
    return stem if stem.partition("_")[0].isdigit() else f"further/{stem}"


def runs_dir() -> Path:
    """Where ``labkit run`` puts executed notebooks and records (git-ignored; LABKIT_RUNS
    overrides)."""
    return _env_path("LABKIT_RUNS", REPO_ROOT / "runs")
