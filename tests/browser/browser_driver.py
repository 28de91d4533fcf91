"""Drive a real JupyterLab 4 / Notebook 7 server from the browser tests.

``JupyterServer`` starts ``jupyter lab`` or ``jupyter notebook`` on 127.0.0.1 (a free port,
token auth, a temporary root folder, isolated config/data/runtime/IPython folders), with
nbrefine's built labextension on ``JUPYTER_PATH``. ``App`` wraps a Playwright page on that
server and reaches the application model through ``window.jupyterapp``
(``expose_app_in_browser``): cell sources are set through the model, never typed, because
typing multi-line Python gets auto-indented.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import nbformat

try:
    from playwright.sync_api import expect
except ImportError:  # only the `browser` extra installs it; without it the tests are skipped (conftest)
    expect = None

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"  # screenshots, server logs (git ignores it)
BUILT_EXTENSION = ROOT / "nbrefine" / "labextension"
EXTENSION_NAME = "nbrefine-labextension"
PLUGIN_ID = "nbrefine-labextension:plugin"


def artifact(locator: Any, file: str) -> Path:
    """A screenshot of ``locator`` (scrolled into view) into the artifacts folder, as ``file``."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    locator.scroll_into_view_if_needed()
    locator.screenshot(path=str(ARTIFACTS / file))
    return ARTIFACTS / file


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class JupyterServer:
    """``jupyter lab`` (``app="lab"``) or ``jupyter notebook`` (``app="notebook"``) in a subprocess."""

    def __init__(
        self,
        app: str,
        workdir: Path,
        env: dict[str, str],
        log_dir: Path,
        settings: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        self.app = app
        self.workdir = workdir
        self.root = workdir / "root"
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.base = f"http://127.0.0.1:{self.port}"
        for sub in ("root", "config", "data", "runtime", "ipython", "path/labextensions"):
            (workdir / sub).mkdir(parents=True, exist_ok=True)
        # User settings, e.g. {"@jupyterlab/notebook-extension:tracker": {...}}. Always: no "get
        # notified about Jupyter news?" toast over the panel, no update check.
        user_settings = {
            "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False},
            **(settings or {}),
        }
        for plugin, values in user_settings.items():
            package, _, name = plugin.partition(":")
            folder = workdir / "config" / "lab" / "user-settings" / package
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{name}.jupyterlab-settings").write_text(json.dumps(values), encoding="utf-8")
        link = workdir / "path" / "labextensions" / EXTENSION_NAME
        if not link.exists():
            link.symlink_to(BUILT_EXTENSION, target_is_directory=True)
        self.env = {
            **env,
            "JUPYTER_PATH": str(workdir / "path"),  # first in the search path: the fresh build wins
            "JUPYTER_CONFIG_DIR": str(workdir / "config"),  # no user settings, no saved workspaces
            "JUPYTER_DATA_DIR": str(workdir / "data"),
            "JUPYTER_RUNTIME_DIR": str(workdir / "runtime"),
            "IPYTHONDIR": str(workdir / "ipython"),
            "JUPYTER_PLATFORM_DIRS": "1",
            "PYTHONUNBUFFERED": "1",
        }
        module = {"lab": "jupyterlab", "notebook": "notebook"}[app]
        expose = {"lab": "--LabApp.expose_app_in_browser=True", "notebook": "--expose-app-in-browser"}[app]
        self.cmd = [
            sys.executable,
            "-m",
            module,
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root}",
            "--ServerApp.open_browser=False",
            "--ServerApp.disable_check_xsrf=False",
            "--LanguageServerManager.autodetect=False",
            expose,
        ]
        if os.geteuid() == 0:
            self.cmd.append("--ServerApp.allow_root=True")
        self.log_path = log_dir / f"server-{workdir.name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 90.0) -> JupyterServer:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            self.cmd,
            env=self.env,
            cwd=self.root,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"jupyter {self.app} exited with {self.proc.returncode}; see {self.log_path}"
                )
            with contextlib.suppress(OSError, urllib.error.URLError):
                if self.api("GET", "/api/status") is not None:
                    return self
            time.sleep(0.25)
        raise TimeoutError(f"jupyter {self.app} did not answer in {timeout:g} s; see {self.log_path}")

    def stop(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(Exception):
            for session in self.api("GET", "/api/sessions") or []:
                self.api("DELETE", f"/api/sessions/{session['id']}")
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            self.proc.wait(timeout=10)
        self.proc = None

    def api(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self.base}{path}",
            data=data,
            method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            raw = response.read()
        return json.loads(raw) if raw else None

    def shutdown_kernels(self) -> None:
        """Delete every session (and so every kernel): each test starts from none."""
        for session in self.api("GET", "/api/sessions") or []:
            with contextlib.suppress(urllib.error.URLError):
                self.api("DELETE", f"/api/sessions/{session['id']}")

    def url(self, path: str) -> str:
        sep = "&" if "?" in path else "?"
        return f"{self.base}{path}{sep}token={self.token}"

    def notebook_url(self, name: str) -> str:
        if self.app == "lab":
            return self.url(f"/lab/tree/{name}?reset")  # ?reset: no workspace left by an earlier test
        return self.url(f"/notebooks/{name}")

    def write_notebook(self, name: str, sources: list[str]) -> list[str]:
        """Write an nbformat 4.5 notebook (cells have ids) of code cells; returns the cell ids."""
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nb.cells = [nbformat.v4.new_code_cell(source) for source in sources]
        path = self.root / name
        nbformat.write(nb, path)
        return [cell.id for cell in nb.cells]

    def read_notebook(self, name: str) -> Any:
        return nbformat.read(self.root / name, as_version=4)

    def copy_notebook(self, src: str, dst: str) -> None:
        shutil.copyfile(self.root / src, self.root / dst)


# Helpers installed in the page as window.__nbr. Every function takes the notebook's path.
HELPERS_JS = r"""
() => {
  if (window.__nbr) { return true; }
  const app = window.jupyterapp;
  const panels = () => Array.from(app.shell.widgets('main')).filter(
    w => w && w.content && w.sessionContext && w.context && w.content.model !== undefined
  );
  const panel = path => {
    const found = panels().find(w => w.context.path === path);
    if (!found) {
      throw new Error(`notebook ${path} is not open (open: ${panels().map(p => p.context.path)})`);
    }
    return found;
  };
  const cells = path => {
    const model = panel(path).content.model;
    return Array.from({ length: model.cells.length }, (_, i) => model.cells.get(i));
  };
  const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));
  const outputText = cell => (cell.outputs ? cell.outputs.toJSON() : []).map(o => {
    if (o.output_type === 'stream') { return Array.isArray(o.text) ? o.text.join('') : o.text; }
    if (o.output_type === 'error') { return `${o.ename}: ${o.evalue}\n`; }
    const plain = o.data && o.data['text/plain'];
    return plain === undefined ? '' : (Array.isArray(plain) ? plain.join('') : plain) + '\n';
  }).join('');
  window.__nbr = {
    paths: () => panels().map(p => p.context.path),
    isOpen: path => panels().some(p => p.context.path === path),
    pluginActive: id => (app.isPluginActivated ? app.isPluginActivated(id) : app.hasPlugin(id)),
    appName: () => app.name,
    async ready(path, timeoutMs) {
      const p = panel(path);
      await p.context.ready;
      await p.sessionContext.ready;
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const kernel = p.sessionContext.session && p.sessionContext.session.kernel;
        if (kernel && kernel.connectionStatus === 'connected' && kernel.status === 'idle') {
          return kernel.id;
        }
        if (Date.now() > deadline) {
          throw new Error(`kernel of ${path} not idle: ${kernel && kernel.status}`);
        }
        await sleep(100);
      }
    },
    kernelId: path => {
      const s = panel(path).sessionContext.session;
      return s && s.kernel ? s.kernel.id : null;
    },
    sources: path => cells(path).map(c => c.sharedModel.getSource()),
    ids: path => cells(path).map(c => c.id),
    metadata: (path, i, key) => {
      const value = cells(path)[i].getMetadata(key);
      return value === undefined ? null : value;
    },
    setSource: (path, i, source) => { cells(path)[i].sharedModel.setSource(source); },
    setMetadata: (path, i, key, value) => { cells(path)[i].setMetadata(key, value); },
    insertCell: (path, i, source) => {
      panel(path).content.model.sharedModel.insertCell(i, { cell_type: 'code', source });
    },
    activate: path => { app.shell.activateById(panel(path).id); },
    activePath: () => {
      const w = app.shell.currentWidget;
      return w && w.context ? w.context.path : null;
    },
    mark: (path, i, tag) => { panel(path).content.widgets[i].node.setAttribute('data-nbr', tag); },
    async run(path, i) {
      const p = panel(path);
      app.shell.activateById(p.id);
      p.content.activeCellIndex = i;
      p.content.deselectAll();
      p.content.mode = 'command';
      await app.commands.execute('notebook:run-cell');
      return outputText(cells(path)[i]);
    },
    output: (path, i) => outputText(cells(path)[i]),
    executionCount: (path, i) => {
      const c = cells(path)[i];
      return c.executionCount === undefined ? null : c.executionCount;
    },
    // Run code in the notebook's kernel without a cell (works while another notebook is active).
    async exec(path, code) {
      const kernel = panel(path).sessionContext.session.kernel;
      const future = kernel.requestExecute({ code, store_history: false });
      let text = '';
      future.onIOPub = msg => {
        const t = msg.header.msg_type;
        if (t === 'stream') { text += msg.content.text; }
        if (t === 'error') { text += `${msg.content.ename}: ${msg.content.evalue}\n`; }
        if (t === 'execute_result') { text += msg.content.data['text/plain'] + '\n'; }
      };
      const reply = await future.done;
      return { status: reply.content.status, text };
    },
    async save(path) { await panel(path).context.save(); },
    async close(path) {
      const p = panel(path);
      p.context.model.dirty = false;
      p.dispose();
    },
    async open(path) {
      await app.commands.execute('docmanager:open', { path, factory: 'Notebook' });
      for (let i = 0; i < 200 && !panels().some(p => p.context.path === path); i++) { await sleep(50); }
      return panel(path).id;
    },
    async restartKernel(path) {
      const p = panel(path);
      await p.sessionContext.session.kernel.restart();
    },
    async changeKernel(path) {
      const p = panel(path);
      const before = p.sessionContext.session.kernel.id;
      await p.sessionContext.changeKernel({ name: 'python3' });
      return [before, p.sessionContext.session.kernel.id];
    },
    undoInModel: (path, i) => cells(path)[i].sharedModel.undo(),
    documentWideUndo: path => !panel(path).content.model.sharedModel.disableDocumentWideUndoRedo,
  };
  return true;
}
"""


class App:
    """A Playwright page on a Jupyter server, with the helpers above."""

    def __init__(self, page: Any, server: JupyterServer) -> None:
        self.page = page
        self.server = server

    def _install(self) -> None:
        self.page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell", timeout=60_000)
        self.page.wait_for_function("() => window.jupyterapp.started !== undefined", timeout=60_000)
        self.page.evaluate("() => window.jupyterapp.restored")
        self.page.evaluate(HELPERS_JS)

    def js(self, name: str, *args: Any) -> Any:
        """Call ``window.__nbr[name](*args)`` (awaited)."""
        return self.page.evaluate("([name, args]) => window.__nbr[name](...args)", [name, list(args)])

    def open(self, name: str, timeout: float = 60.0) -> str:
        """Load the notebook's page, wait for its kernel to be idle; returns the kernel id."""
        self.page.goto(self.server.notebook_url(name))
        self._install()
        self.page.wait_for_function(
            "(path) => window.__nbr.isOpen(path)", arg=name, timeout=int(timeout * 1000)
        )
        return str(self.js("ready", name, int(timeout * 1000)))

    def open_in_app(self, name: str, timeout: float = 60.0) -> str:
        """Open another notebook in the same page (JupyterLab only)."""
        self.js("open", name)
        return str(self.js("ready", name, int(timeout * 1000)))

    def run(self, name: str, index: int) -> str:
        return str(self.js("run", name, index))

    def sources(self, name: str) -> list[str]:
        return list(self.js("sources", name))

    def cell(self, name: str, index: int, tag: str) -> Any:
        """A locator for the cell's DOM node (tagged through the model, not by position in the DOM)."""
        self.js("mark", name, index, tag)
        return self.page.locator(f'[data-nbr="{tag}"]')

    def wait_source(self, name: str, index: int, expected: str, timeout: float = 20.0) -> None:
        self.page.wait_for_function(
            "([path, i, expected]) => window.__nbr.sources(path)[i] === expected",
            arg=[name, index, expected],
            timeout=int(timeout * 1000),
        )
