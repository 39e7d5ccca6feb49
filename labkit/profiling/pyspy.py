"""``lk.status("pyspy")``: may py-spy read another process's stacks here? (chapter 13).

py-spy samples a running worker from outside (``ptrace`` / ``process_vm_readv``); that needs
the same user and ``/proc/sys/kernel/yama/ptrace_scope`` 0, or root, or ``CAP_SYS_PTRACE``
(Docker: ``--cap-add SYS_PTRACE``). The check tries it once on a child process.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

from ..facilities import ptrace_scope
from ..optional import check

_status: dict = {}


@check("pyspy")
def _pyspy_status() -> tuple[bool, str]:
    """``(True, version)`` if py-spy can sample a child process here, else ``(False, why)``."""
    if "result" in _status:
        return _status["result"]
    here = Path(sys.executable).parent / "py-spy"  # a venv not activated
    exe = shutil.which("py-spy") or (str(here) if here.exists() else None)
    if exe is None:
        result = (False, "py-spy is not installed (pip install py-spy)")
    else:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        try:
            time.sleep(0.3)
            r = subprocess.run([exe, "dump", "--pid", str(child.pid)], capture_output=True,
                               text=True, timeout=30)
            if r.returncode == 0:
                v = subprocess.run([exe, "--version"], capture_output=True, text=True)
                result = (True, v.stdout.strip() or "py-spy")
            else:
                err = (r.stderr or r.stdout).strip().splitlines()
                scope = ptrace_scope()
                hint = f"; ptrace_scope is {scope}" if scope is not None else ""
                result = (False, f"py-spy may not read other processes here: "
                                 f"{err[-1] if err else 'exit ' + str(r.returncode)}{hint} "
                                 "(needs ptrace: ptrace_scope 0, root, or CAP_SYS_PTRACE)")
        except subprocess.TimeoutExpired:
            result = (False, "py-spy did not answer within 30 s")
        finally:
            child.kill()
            child.wait()
    _status["result"] = result
    return result
