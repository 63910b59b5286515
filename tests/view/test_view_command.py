"""`duraloop view`: prints its URL, serves the API with the token, exits 0 on SIGTERM."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx2

from cli._support import clean_env
from duraloop.store import JsonlStore

from ._support import paused_session

_URL = re.compile(r"duraloop view: (http://127\.0\.0\.1:(\d+)/\?token=([\w-]+))\n")


def _start(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "duraloop", "view", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(tmp_path),
        start_new_session=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()  # one line, flushed before serving
    return process, line


def test_view_prints_its_url_serves_the_api_and_exits_0_on_sigterm(
    tmp_path: Path, workspace: Path
) -> None:
    root = tmp_path / "sessions"
    paused_session(JsonlStore(root), workspace)
    process, line = _start(tmp_path, "--store", str(root))
    try:
        match = _URL.fullmatch(line)
        assert match is not None, line
        url, port, token = match.groups()
        base = f"http://127.0.0.1:{port}"
        rows = httpx2.get(f"{base}/api/sessions", headers={"X-Duraloop-Token": token}).json()
        refused = httpx2.get(f"{base}/api/sessions")
        page = httpx2.get(url)
    finally:
        process.send_signal(signal.SIGTERM)
        _out, err = process.communicate(timeout=30)
    assert [(row["id"], row["state"]) for row in rows["sessions"]] == [("paused", "paused")]
    assert refused.status_code == 403
    assert page.status_code == 200
    assert process.returncode == 0, err
    assert len(token) >= 32  # secrets.token_urlsafe(24)


def test_sigterm_ends_an_open_live_stream_and_exits_0(tmp_path: Path, workspace: Path) -> None:
    root = tmp_path / "sessions"
    paused_session(JsonlStore(root), workspace)
    process, line = _start(tmp_path, "--store", str(root))
    match = _URL.fullmatch(line)
    assert match is not None, line
    _url, port, token = match.groups()
    stream = f"http://127.0.0.1:{port}/api/sessions/paused/stream?token={token}"
    try:
        with httpx2.stream("GET", stream, timeout=30) as answer:
            lines = answer.iter_lines()
            assert next(lines) == "retry: 1000"
            assert "id: 0" in (next(lines), next(lines))  # a blank line, then the first event
            process.send_signal(signal.SIGTERM)
            rest = list(lines)  # the server ends the stream: the body ends
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        _out, err = process.communicate(timeout=30)
    assert rest[-1] == ""  # the last event was whole
    assert process.returncode == 0, err
    assert "Traceback" not in err and "ERROR" not in err


def test_view_on_another_host_warns_on_stderr(tmp_path: Path) -> None:
    process, line = _start(tmp_path, "--store", str(tmp_path / "s"), "--host", "0.0.0.0")
    time.sleep(0.2)
    process.send_signal(signal.SIGTERM)
    _out, err = process.communicate(timeout=30)
    assert _URL.fullmatch(line) is not None, line
    assert "warning: listening on 0.0.0.0, not loopback" in err
    assert process.returncode == 0


def test_view_of_a_store_that_does_not_exist_warns_once_and_still_serves(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-store"
    process, line = _start(tmp_path, "--store", str(missing))
    try:
        match = _URL.fullmatch(line)
        assert match is not None, line
        _url, port, token = match.groups()
        rows = httpx2.get(
            f"http://127.0.0.1:{port}/api/sessions", headers={"X-Duraloop-Token": token}
        ).json()
    finally:
        process.send_signal(signal.SIGTERM)
        _out, err = process.communicate(timeout=30)
    assert rows["sessions"] == []
    warning = (
        f"duraloop view: store {missing} does not exist (yet): no sessions to show; check --store"
    )
    assert [text for text in err.splitlines() if "does not exist" in text] == [warning]
    assert process.returncode == 0, err
