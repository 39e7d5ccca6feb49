"""No private torch name in labkit or its tests (issue 32): torch's private names change
between releases and a learner cannot type them.

Walks every ``.py`` file under labkit/ and tests/ with ``ast`` and fails, naming file:line, on

* an import of a private torch module or name: ``import torch._C``, ``from
  torch.utils.data import _utils``, ``from torch.utils.data.dataloader import
  _MultiProcessingDataLoaderIter``;
* a private component in an attribute chain that starts at ``torch``
  (``torch.utils.data._utils``);
* an attribute access, on anything but ``self`` / ``cls``, of a name torch keeps private in
  the classes the kit uses (``it._shutdown_workers()``, ``loader._iterator``): the names
  below, plus every single-underscore name ``dir()`` lists on those public classes.

Dunders (``__name__``, ``__iter__``) are public Python protocol and allowed.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# torch's multi-worker iterator keeps these on its instances (dir() of a class misses them)
_INSTANCE_NAMES = {
    "_workers", "_timeout", "_task_info", "_rcvd_idx", "_send_idx", "_worker_pids_set",
    "_workers_status", "_persistent_workers", "_iterator", "_index_queues", "_data_queue",
    "_worker_result_queue", "_pin_memory_thread", "_workers_done_event", "_shutdown",
    "_num_workers", "_prefetch_factor", "_sampler_iter", "_dataset_kind", "_dataset",
    "_MultiProcessingDataLoaderIter", "_SingleProcessDataLoaderIter", "_BaseDataLoaderIter",
    "_utils", "_C", "_remove_worker_pids", "_set_worker_pids", "_set_SIGCHLD_handler",
    "_shutdown_workers", "_try_get_data", "_get_data", "_get_iterator", "_next_data",
    "_try_put_index", "_process_data", "_mark_worker_as_unavailable", "_share_fd_cpu_",
    "_share_filename_cpu_", "_new_shared", "_typed_storage", "_untyped_storage",
}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _torch_private_names() -> set[str]:
    import torch
    import torch.utils.data as tud

    classes = (tud.DataLoader, tud.Dataset, tud.IterableDataset, tud.Sampler, torch.Tensor,
               torch.UntypedStorage, torch.Generator)
    names = {n for c in classes for n in dir(c) if _private(n)}
    names -= {n for n in dir(object) if _private(n)}
    return names | _INSTANCE_NAMES


def _chain(node: ast.AST) -> list[str] | None:
    """``a.b.c`` as ``["a", "b", "c"]``; None if it does not start at a plain name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id, *reversed(parts)]
    return None


def _is_torch(module: str | None) -> bool:
    return bool(module) and (module == "torch" or module.startswith("torch."))


def violations(path: Path, private_names: set[str], root: Path = ROOT) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    torch_aliases = {"torch"}
    out = []

    def bad(node, what):
        out.append(f"{path.relative_to(root)}:{node.lineno}: {what}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if _is_torch(a.name):
                    if any(_private(p) for p in a.name.split(".")):
                        bad(node, f"import {a.name}")
                    torch_aliases.add((a.asname or a.name).split(".")[0])
        elif isinstance(node, ast.ImportFrom) and _is_torch(node.module):
            if any(_private(p) for p in node.module.split(".")):
                bad(node, f"from {node.module} import ...")
            for a in node.names:
                if _private(a.name):
                    bad(node, f"from {node.module} import {a.name}")
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not _private(node.attr):
            continue
        chain = _chain(node)
        if chain and chain[0] in torch_aliases:
            bad(node, ".".join(chain))
        elif node.attr in private_names and not (chain and chain[0] in ("self", "cls")):
            bad(node, f"...{node.attr}")
    return out


def _files() -> list[Path]:
    return sorted(p for d in ("labkit", "tests") for p in (ROOT / d).rglob("*.py"))


def test_the_walk_catches_each_kind_of_use(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import torch\nimport torch._C\nfrom torch.utils.data import _utils, DataLoader\n"
        "from torch.utils.data.dataloader import _MultiProcessingDataLoaderIter\n"
        "from torch.utils.data._utils import signal_handling\n"
        "x = torch.utils.data._utils\nit._shutdown_workers()\nloader._iterator = None\n"
        "self._iterator = None\nprint(DataLoader.__name__, torch.__version__)\n")
    found = violations(probe, _torch_private_names(), root=tmp_path)
    lines = sorted(int(v.split(":")[1]) for v in found)
    assert lines == [2, 3, 4, 5, 6, 7, 8], found  # not 9 (self's own), not 10 (dunders)


def test_no_private_torch_name_in_labkit_or_tests():
    names = _torch_private_names()
    found = [v for p in _files() for v in violations(p, names)]
    assert not found, "private torch names (see this test's docstring):\n" + "\n".join(found)
