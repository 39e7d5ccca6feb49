"""The main job in a real browser: chapter 01's dashboard in JupyterLab, Run clicked.

JupyterLab runs headless on a loopback port with a random token and its own config, data,
runtime, settings and workspace folders (no user state, no news, no autosave); Debian's
Chromium, driven by Selenium through Debian's chromedriver, opens a copy of the chapter cut
to its dashboard's cells, runs them all, waits for the ipywidgets dashboard, clicks **Run**
and waits for the throughput it reports. The screenshot lands in
``test-artifacts/browser/01_dashboard.png``.

``pytest -m "not browser"`` leaves it out. Without /usr/bin/chromium it is skipped, except
under ``CI=true`` (CI installs Chromium, so there its absence is a failure).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import nbformat
import psutil
import pytest

from labkit.loading.processes import stop_processes
from labkit.remote.launch import free_port

REPO = Path(__file__).resolve().parent.parent
CHAPTER = "01_measuring_a_loader.ipynb"
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
ARTIFACTS = REPO / "test-artifacts" / "browser"
SCREENSHOT = ARTIFACTS / "01_dashboard.png"
# Chromium flags: headless, no sandbox (containers, root), and none of its background
# connections (updates, sync, field trials): on a closed network they are refused and slow.
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-proxy-server",
                  "--disable-dev-shm-usage", "--window-size=1400,1300"]
# JupyterLab user settings: no news or update checks, every cell in the DOM (windowing would
# detach the dashboard while it is off screen), and never save the chapter's outputs.
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false",
                                                    "checkForUpdates": False},
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
    "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
}
SERVER_START_S = 45     # JupyterLab answering /api/status
PAGE_S = 45             # the notebook open, its kernel started
CELLS_S = 90            # the dashboard's cells at ci scale (see _dashboard_cells)
RUN_S = 30              # one dashboard run (2 s at ci) reported
WORKERS = "1"           # the num_workers the test picks before clicking Run


def _needs_chromium() -> None:
    """Skip without Chromium/chromedriver/selenium, but fail under CI, which installs them."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("the selenium package (pip install -e '.[dev]')")
    if not missing:
        return
    reason = ("install Debian's chromium and chromium-driver "
              f"(apt-get install chromium chromium-driver); missing: {', '.join(missing)}")
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but the browser test cannot run: {reason}", pytrace=False)
    pytest.skip(reason)


def _api(base: str, token: str, path: str, method: str = "GET", timeout: float = 5):
    req = urllib.request.Request(f"{base}{path}", method=method,
                                 headers={"Authorization": f"token {token}"})
    # no proxy for loopback, whatever the environment says
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(req, timeout=timeout) as r:
        body = r.read()
    return json.loads(body) if body else None


class Lab:
    """A JupyterLab server in its own session, with isolated state under ``home``."""

    def __init__(self, home: Path, root: Path):
        self.home, self.root = home, root
        self.token = secrets.token_hex(16)
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = ARTIFACTS / "jupyterlab.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        settings = self.home / "lab-settings"
        for plugin, values in LAB_SETTINGS.items():
            f = settings / f"{plugin}.jupyterlab-settings"
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(json.dumps(values))
        env = {
            **os.environ,
            "LABKIT_SCALE": "ci",  # the kernel runs the chapter at ci scale
            "JUPYTER_CONFIG_DIR": str(self.home / "config"),
            "JUPYTER_DATA_DIR": str(self.home / "data"),
            "JUPYTER_RUNTIME_DIR": str(self.home / "runtime"),
            "JUPYTERLAB_SETTINGS_DIR": str(settings),
            "JUPYTERLAB_WORKSPACES_DIR": str(self.home / "workspaces"),
            "IPYTHONDIR": str(self.home / "ipython"),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO),
                                                        os.environ.get("PYTHONPATH")])),
        }
        argv = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1",
                f"--port={self.port}", "--port-retries=0",
                f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={self.root}",
                "--LabApp.news_url=None",
                "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            argv.append("--allow-root")
        self.log = self.log_path.open("w")
        # Its own session, so teardown can stop the server and its kernels as one group.
        self.proc = subprocess.Popen(argv, env=env, cwd=self.root, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + SERVER_START_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {self.proc.returncode}; "
                                   f"log: {self.log_path}")
            try:
                _api(self.base, self.token, "/api/status", timeout=2)
                return
            except (OSError, urllib.error.URLError):
                time.sleep(0.3)
        raise TimeoutError(f"JupyterLab did not answer /api/status within {SERVER_START_S} s; "
                           f"log: {self.log_path}")

    def stop(self) -> None:
        if self.proc is None:
            return
        try:  # kernels first, politely: their own cleanup (DataLoader workers) runs
            for k in _api(self.base, self.token, "/api/kernels"):
                _api(self.base, self.token, f"/api/kernels/{k['id']}", "DELETE", timeout=10)
        except (OSError, urllib.error.URLError, ValueError):
            pass
        group = [psutil.Process(self.proc.pid), *self._children()]
        for sig, wait_s in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass
            _, group = psutil.wait_procs([p for p in group if _alive(p)], timeout=wait_s)
            if not group:
                break
        self.proc.wait(timeout=5)
        self.log.close()

    def _children(self) -> list:
        try:
            return psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []


def _alive(p) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _browser(profile: Path, temp: Path):
    """Chromium through chromedriver, with its profile in ``profile`` and its temp folder
    ``temp``: with --disable-dev-shm-usage it keeps its shared memory as
    ``.org.chromium.Chromium.*`` files in TMPDIR, which a Chromium stopped by a signal leaves
    behind. There they go with ``temp``, not into the session's temp folder."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for flag in [*CHROMIUM_FLAGS, f"--user-data-dir={profile}"]:
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # driver.get_log("browser")
    # Debian's chromedriver matches Debian's chromium: Selenium Manager never downloads one.
    temp.mkdir(parents=True, exist_ok=True)
    service = Service(str(CHROMEDRIVER), log_output=str(ARTIFACTS / "chromedriver.log"),
                      env={**os.environ, "TMPDIR": str(temp)})
    driver = webdriver.Chrome(options=opts, service=service)
    driver.set_page_load_timeout(PAGE_S)
    driver.set_script_timeout(30)
    return driver


def _quit(driver) -> None:
    """Close Chromium and chromedriver; kill any Chromium process that outlives them."""
    procs = []
    try:
        procs = psutil.Process(driver.service.process.pid).children(recursive=True)
    except (psutil.NoSuchProcess, AttributeError):
        pass
    try:
        driver.quit()
    finally:
        stop_processes(procs, grace_s=5)


def _wait(driver, what: str, timeout: float, condition):
    """Poll ``condition(driver)`` until truthy; a TimeoutError saying ``what`` otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = condition(driver)
        except Exception:  # the DOM changes under us: stale elements, a re-render
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout:.0f} s")
        time.sleep(0.25)


_ERRORS = "[data-mime-type='application/vnd.jupyter.error']"


def _cells_done(driver):
    """True when no cell is queued or running and the last code cell has run."""
    from selenium.webdriver.common.by import By

    errors = driver.find_elements(By.CSS_SELECTOR, f".jp-Notebook {_ERRORS}")
    if errors:
        raise AssertionError(f"a cell failed in the browser:\n{errors[0].text[:2000]}")
    prompts = [p.text for p in driver.find_elements(
        By.CSS_SELECTOR, ".jp-Notebook .jp-CodeCell .jp-InputArea-prompt")]
    return bool(prompts) and not any("*" in p for p in prompts) and \
        bool(re.search(r"\d", prompts[-1]))


def _status(driver) -> str:
    """The dashboard's status label: 'run N done: 12,345 samples/s', 'running: ...'."""
    from selenium.webdriver.common.by import By

    labels = driver.find_elements(By.CSS_SELECTOR, ".jupyter-widgets.widget-label")
    texts = [lb.text for lb in labels if "samples/s" in lb.text or lb.text.startswith("run")]
    return texts[-1] if texts else ""


def _newest_row(driver) -> list[str]:
    """The cells of the dashboard table's newest run (it lists runs newest first)."""
    from selenium.webdriver.common.by import By

    rows = driver.find_elements(By.CSS_SELECTOR, ".jupyter-widgets.widget-html table tr")
    return rows[1].text.split() if len(rows) > 1 else []


@pytest.mark.browser
@pytest.mark.timeout(210)  # the ceiling; every wait below has its own, shorter limit
def test_dashboard_in_a_real_browser(tmp_path, ci_fixture):
    _needs_chromium()
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for old in (SCREENSHOT, ARTIFACTS / "failure.png"):
        old.unlink(missing_ok=True)
    for name in ("sample_files", "array"):  # the chapter's data, made before the clock starts
        ci_fixture(name)
    root = tmp_path / "root"  # a copy: whatever the browser does, the chapter stays clean
    root.mkdir()
    _dashboard_cells(REPO / "notebooks" / CHAPTER, root / CHAPTER)
    lab = Lab(tmp_path / "jupyter", root)
    driver = chromium_tmp = None
    try:
        lab.start()
        # short: Chromium's singleton socket goes under it (a socket path has 107 bytes)
        chromium_tmp = Path(tempfile.mkdtemp(prefix="chromium-"))
        driver = _browser(tmp_path / "chromium-profile", chromium_tmp)
        driver.get(f"{lab.base}/lab/tree/{CHAPTER}?reset&token={lab.token}")
        _wait(driver, "the notebook open with its kernel idle", PAGE_S, lambda d: d.find_elements(
            By.CSS_SELECTOR, ".jp-NotebookPanel .jp-Notebook .jp-Cell") and _kernel_idle(lab))
        # Run > Run All Cells, through the menu as a learner would
        menu = _wait(driver, "the Run menu", 20, lambda d: next(
            (m for m in d.find_elements(By.CSS_SELECTOR, "#jp-MainMenu .lm-MenuBar-item")
             if m.text.strip() == "Run"), None))
        menu.click()
        _wait(driver, "Run All Cells in the Run menu", 10, lambda d: next(
            (i for i in d.find_elements(By.CSS_SELECTOR, ".lm-Menu .lm-Menu-item")
             if i.text.split("\n")[0].strip() == "Run All Cells"), None)).click()
        _wait(driver, "all cells run", CELLS_S, _cells_done)
        run = _wait(driver, "the dashboard's Run button", 30, lambda d: next(
            (b for b in d.find_elements(By.CSS_SELECTOR, ".jupyter-widgets.widget-button")
             if b.text.strip() == "Run" and b.is_enabled()), None))
        before = _status(driver)  # the headless runs' last line, e.g. "run 2 done: ..."
        m = re.match(r"run (\d+)", before)
        n = int(m.group(1)) + 1 if m else 1
        # the whole dashboard in view: knobs, buttons, plot, table
        driver.execute_script("arguments[0].closest('.jp-OutputArea')"
                              ".scrollIntoView({block: 'start'});", run)
        # a learner's move: pick a knob, then Run
        knob = next(d for d in driver.find_elements(By.CSS_SELECTOR, ".widget-dropdown")
                    if d.text.startswith("num_workers"))
        Select(knob.find_element(By.TAG_NAME, "select")).select_by_visible_text(WORKERS)
        run.click()
        done = _wait(driver, f"dashboard run {n} reported", RUN_S, lambda d: re.search(
            rf"run {n} done: ([\d,]+) samples/s", _status(d)))
        samples_per_s = int(done.group(1).replace(",", ""))
        # the table follows the status label (separate widget updates): its newest row first
        newest = _wait(driver, f"run {n} in the dashboard's table", 10, lambda d: [
            row for row in [_newest_row(d)] if row[:1] == [str(n)]])[0]
        assert newest[1] == WORKERS, f"run {n} ran with num_workers={newest[1]}, not {WORKERS}"
        img = driver.find_elements(By.CSS_SELECTOR, ".jupyter-widgets.widget-image")
        assert img and img[-1].size["height"] > 100, "the throughput plot is not shown"
        driver.find_element(By.TAG_NAME, "body").send_keys(Keys.ESCAPE)  # command mode, no caret
        driver.save_screenshot(str(SCREENSHOT))
        print(f"\nscreenshot: {SCREENSHOT}\ndashboard run {n}: {samples_per_s:,} samples/s")
        png = SCREENSHOT.read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000, "a blank screenshot?"
        assert samples_per_s > 0
    except Exception as e:
        shot = ARTIFACTS / "failure.png"
        if driver is not None:
            try:
                driver.save_screenshot(str(shot))
            except Exception:
                shot = "(no screenshot: the browser did not answer)"
        raise AssertionError(f"{type(e).__name__}: {e}\n  screenshot: {shot}\n"
                             f"  JupyterLab log: {lab.log_path}") from e
    finally:
        if driver is not None:
            _quit(driver)
        lab.stop()
        if chromium_tmp is not None:
            shutil.rmtree(chromium_tmp, ignore_errors=True)


def _dashboard_cells(src: Path, dst: Path) -> int:
    """The chapter cut to what its dashboard needs: the code cells up to the one that makes
    ``files`` (parameters, fixtures, the train step), the cell that writes the dashboard's
    loader factory (``def make_loader(``, the learner's) and the dashboard's cell. The
    chapter's measurements run in nbval already; here they only cost minutes on a loaded
    machine."""
    nb = nbformat.read(src, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    needs = next(i for i, c in enumerate(code) if re.search(r"^files = ", c.source, re.M))
    factory = next(c for c in code if re.search(r"^def make_loader\(", c.source, re.M))
    dash = next(c for c in code if "lk.Dashboard(" in c.source)
    nb.cells = code[:needs + 1] + [factory, dash]
    for c in nb.cells:
        c.outputs, c.execution_count = [], None
    nbformat.write(nb, dst)
    return len(nb.cells)


def _kernel_idle(lab: Lab) -> bool:
    try:
        kernels = _api(lab.base, lab.token, "/api/kernels")
    except (OSError, urllib.error.URLError, ValueError):
        return False
    return bool(kernels) and all(k["execution_state"] == "idle" for k in kernels)


def test_without_chromium_it_skips_but_fails_under_ci(monkeypatch, tmp_path):
    monkeypatch.setattr(sys.modules[__name__], "CHROMIUM", tmp_path / "no-chromium")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="install Debian's chromium and chromium-dr"):
        _needs_chromium()
    monkeypatch.setenv("CI", "true")  # CI installs it: its absence there is a failure
    with pytest.raises(pytest.fail.Exception, match="CI=true but the browser test cannot run"):
        _needs_chromium()
