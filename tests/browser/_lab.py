"""A throw-away JupyterLab server for browser tests: temp config, settings and
workspace dirs, a random token, no news pop-up; stopped with SIGTERM."""
from __future__ import annotations

import importlib.util
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--disable-quic"]


def missing() -> str | None:
    """Why a browser test cannot run here, or None."""
    if not Path(CHROMIUM).exists():
        return f"{CHROMIUM} is missing (apt-get install chromium)"
    if importlib.util.find_spec("playwright") is None:
        return "python playwright is not installed (pip install playwright)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lab:
    """``with Lab(tmp, notebooks) as lab: page.goto(lab.url("x.ipynb"))``."""

    def __init__(self, tmp: Path, files: list):
        self.tmp, self.root = Path(tmp), Path(tmp) / "root"
        self.root.mkdir(parents=True)
        for f in files:
            shutil.copy(f, self.root / Path(f).name)
        self.port, self.token = _free_port(), secrets.token_hex(16)
        self.proc = None

    def _env(self) -> dict:
        env = dict(os.environ)
        for var in ("JUPYTER_CONFIG_DIR", "JUPYTER_RUNTIME_DIR", "JUPYTERLAB_SETTINGS_DIR",
                    "JUPYTERLAB_WORKSPACES_DIR"):
            d = self.tmp / var.lower()
            d.mkdir()
            env[var] = str(d)
        news = Path(env["JUPYTERLAB_SETTINGS_DIR"]) / "@jupyterlab" / "apputils-extension"
        news.mkdir(parents=True)
        (news / "notification.jupyterlab-settings").write_text(
            json.dumps({"fetchNews": "false", "checkForUpdates": False}))
        env["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
        env["PYTHONPATH"] = os.pathsep.join(
            [str(Path(__file__).resolve().parents[2])] + [p for p in [env.get("PYTHONPATH")] if p])
        return env

    def __enter__(self) -> "Lab":
        cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1",
               f"--port={self.port}", "--port-retries=0", f"--IdentityProvider.token={self.token}",
               "--allow-root", f"--ServerApp.root_dir={self.root}",
               "--LabApp.expose_app_in_browser=True"]
        self.log = open(self.tmp / "server.log", "w")
        self.proc = subprocess.Popen(cmd, env=self._env(), stdout=self.log,
                                     stderr=subprocess.STDOUT)
        self._wait_ready()
        return self

    def _wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyterlab exited: {(self.tmp / 'server.log').read_text()}")
            try:
                urllib.request.urlopen(self.api("status"), timeout=1).read()
                return
            except OSError:
                time.sleep(0.2)
        raise TimeoutError("jupyterlab did not answer /api/status in time")

    def api(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/api/{path}?token={self.token}"

    def url(self, notebook: str) -> str:
        return f"http://127.0.0.1:{self.port}/lab/tree/{notebook}?reset&token={self.token}"

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
