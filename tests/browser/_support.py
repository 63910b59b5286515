"""The browser tests' machinery: Debian's Chromium driven by Playwright, a real view server.

Chromium is `/usr/bin/chromium` (Debian's package, `apt-get install chromium`; `.ci/run`
installs it), driven by Playwright for Python's sync API with `executable_path`: Playwright
downloads no browser of its own. Without Chromium or Playwright a test skips with a one-line
reason, except under `CI=true`, where it fails: CI must run the browser tests.

The server is the real application (`duraloop.view.create_app`) served by uvicorn in a
thread on a free loopback port, over a JSONL store in the test's temporary directory; the
sessions are written by the library (`AgentLoop` + `ScriptedModel`), in threads of their
own, as another process would write them.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

CHROMIUM = Path(os.environ.get("DURALOOP_TEST_CHROMIUM", "/usr/bin/chromium"))
T = TypeVar("T")


def require_browser() -> None:
    """Skip (or under CI=true fail) unless Playwright and Debian's Chromium are installed."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as exc:
        _unavailable(f"Playwright is not installed ({exc}): pip install -e '.[dev]'")
    if not CHROMIUM.exists():
        _unavailable(f"{CHROMIUM} is missing: apt-get install chromium")


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: the browser tests must run)")
    pytest.skip(reason)


def in_thread(work: Callable[[], T], *, timeout: float = 90.0) -> T:
    """Run `work` in a thread of its own (its own event loop, away from Playwright's)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = work()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, name="duraloop-test-work", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise TimeoutError(f"the work did not finish within {timeout} s")
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


class Background:
    """Work running in a thread while the test drives the browser; `join()` re-raises."""

    def __init__(self, work: Callable[[], Any]) -> None:
        self._box: dict[str, Any] = {}

        def target() -> None:
            try:
                self._box["value"] = work()
            except BaseException as exc:
                self._box["error"] = exc

        self._thread = threading.Thread(target=target, name="duraloop-test-bg", daemon=True)
        self._thread.start()

    def join(self, timeout: float = 60.0) -> Any:
        """Wait for the work; its value, or its exception raised here."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"the background work did not finish within {timeout} s")
        if "error" in self._box:
            raise self._box["error"]
        return self._box.get("value")


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ViewServer:
    """The real view application, served by uvicorn in a thread on 127.0.0.1.

    `stop()` then `start()` serves again on the same port with the same token (a restart:
    the page's EventSource reconnects with its Last-Event-ID).
    """

    def __init__(self, store_root: Path, *, token: str = "test-token-0123456789abcdef") -> None:
        self.store_root = store_root
        self.token = token
        self.port = free_port()
        self._server: Any = None
        self._app: Any = None
        self._thread: threading.Thread | None = None

    @property
    def origin(self) -> str:
        """`http://127.0.0.1:PORT`."""
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str = "/") -> str:
        """A page's URL with the token, as `duraloop view` prints it."""
        return f"{self.origin}{path}?token={self.token}"

    def start(self) -> ViewServer:
        """Serve (again); returns once the socket listens."""
        import uvicorn

        from duraloop.store import JsonlStore
        from duraloop.view import create_app

        app = create_app(JsonlStore(self.store_root), token=self.token, poll_seconds=0.05)
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            lifespan="off",
            timeout_graceful_shutdown=1,
        )
        server = uvicorn.Server(config)
        self._server = server
        self._app = app
        self._thread = threading.Thread(target=server.run, name="duraloop-view", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 20
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the view server did not start on port {self.port}")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        """Stop serving: open streams are cut, the port is free again."""
        if self._server is None or self._thread is None:
            return
        self._app.state.stopping.set()  # the live streams end (as `duraloop view` does on SIGTERM)
        self._server.should_exit = True
        self._thread.join(15)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(5)
        assert not self._thread.is_alive(), "the view server did not stop"
        self._server = None
        self._thread = None


class ViewProcess:
    """`duraloop view --store ROOT` in a child process: the real CLI, its real decider."""

    def __init__(self, store_root: Path) -> None:
        import subprocess
        import sys

        self._process = subprocess.Popen(
            [sys.executable, "-m", "duraloop", "view", "--store", str(store_root)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.url = self._first_line()

    def _first_line(self) -> str:
        box: dict[str, str] = {}
        assert self._process.stdout is not None
        stdout = self._process.stdout
        reader = threading.Thread(target=lambda: box.setdefault("line", stdout.readline()))
        reader.start()
        reader.join(30)
        line = box.get("line", "")
        prefix = "duraloop view: "
        if not line.startswith(prefix):
            self.stop()
            raise RuntimeError(f"duraloop view printed {line!r}, not its URL")
        return line[len(prefix) :].strip()

    @property
    def origin(self) -> str:
        """`http://127.0.0.1:PORT` of the printed URL."""
        return self.url.split("/?", 1)[0]

    def page_url(self, path: str) -> str:
        """A page's URL with the printed token."""
        return f"{self.origin}{path}?{self.url.split('?', 1)[1]}"

    def stop(self) -> str:
        """SIGTERM, wait; the child's stderr."""
        self._process.terminate()
        try:
            _out, errors = self._process.communicate(timeout=15)
        except Exception:
            self._process.kill()
            _out, errors = self._process.communicate(timeout=5)
        return errors
