"""Style rule D21: a failure the user or the machine causes is one line on stderr, not a trace.

Real `python -m duraloop` processes against real file system failures: a full tmpfs (ENOSPC)
and a file size limit (EFBIG, `RLIMIT_FSIZE`, which needs no privileges), a read-only mount,
an unreadable `--store`, and command-line text that is not UTF-8 (argv bytes arrive as lone
surrogates). Mounting needs root; without it those cases are skipped with the reason.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ._support import TIMEOUT, Cli, clean_env, ok, session_id_of

NOT_UTF8 = "caf\udce9"  # the argv bytes b"caf\xe9" as Python hands them over
SYSTEM_FIX = "pass the prompt text itself, or @FILE naming a readable UTF-8 file"


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


def _mount(target: Path, *options: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    target.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", ",".join(options), "tmpfs", str(target)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here: {done.stderr.strip()}")


@pytest.fixture
def mounts() -> Iterator[list[Path]]:
    mounted: list[Path] = []
    yield mounted
    for target in reversed(mounted):
        subprocess.run(["umount", "-l", str(target)], check=False, capture_output=True)


def _one_line_error(result: subprocess.CompletedProcess[str], kind: str) -> str:
    """Assert exit 1 and a `kind: message` last line on stderr with no traceback; return it."""
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr and "─" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines and lines[-1].startswith(f"{kind}: "), result.stderr
    return lines[-1]


def _limit_file_size(max_bytes: int) -> Callable[[], None]:
    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes))

    return limit


def _run_limited(
    cli: Cli, limit: Callable[[], None], *args: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cli.argv(*args),
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=clean_env(cli.tmp),
        timeout=TIMEOUT,
        check=False,
        cwd=cli.tmp,
        preexec_fn=limit,
    )


def _fill(directory: Path) -> Path:
    """Fill the file system holding `directory` until a write fails with ENOSPC."""
    filler = directory / "filler"
    with filler.open("wb", buffering=0) as handle, contextlib.suppress(OSError):
        while True:
            handle.write(b"\0" * 512)
    return filler


@pytest.mark.parametrize("full", ["tmpfs-enospc", "rlimit-efbig"])
def test_a_full_disk_during_a_turn_is_one_store_error_line_and_the_log_stays_valid(
    cli: Cli, mounts: list[Path], full: str
) -> None:
    if full == "tmpfs-enospc":
        cli.store = cli.tmp / "small"
        _mount(cli.store, "size=64k")
        mounts.append(cli.store)
    first = session_id_of(ok(cli("run", "small", "--model", cli.script([{"text": "ok"}]))))
    log = cli.log_path(first)
    before = log.read_bytes()
    turn_2 = ["run", "again", "--model", cli.script([{"text": "two"}]), "--session", first]
    if full == "tmpfs-enospc":
        filler = _fill(cli.store)
        result = cli(*turn_2)
        filler.unlink()
    else:  # room for what opening the session appends (68 bytes), not for turn 2 or its closing
        result = _run_limited(cli, _limit_file_size(len(before) + 200), *turn_2)

    line = _one_line_error(result, "StoreError")
    assert first in line
    assert log.read_bytes().startswith(before)  # turn 1 is kept whole
    report = json.loads(cli("check", first, "--json").stdout)
    assert report["valid"], report


def test_demo_on_a_read_only_file_system_is_one_usage_error_line(
    cli: Cli, mounts: list[Path]
) -> None:
    target = cli.tmp / "ro"
    _mount(target, "size=64k", "ro")
    mounts.append(target)
    line = _one_line_error(cli("demo", "--dir", str(target / "demo")), "UsageError")
    assert "Read-only file system" in line and "writable directory" in line
    assert list(target.iterdir()) == []


@pytest.mark.parametrize("command", [["run", "hi"], ["show", "some-id"], ["check", "some-id"]])
def test_store_on_proc_1_is_one_error_line(cli: Cli, command: list[str]) -> None:
    extra = ["--model", cli.script([{"text": "ok"}])] if command[0] == "run" else []
    result = cli(*command, *extra, "--store", "/proc/1", store=False)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr and "─" not in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


@pytest.mark.parametrize("command", [["run", NOT_UTF8], ["resume", "any-id", NOT_UTF8]])
def test_a_non_utf8_prompt_is_refused_before_anything_is_written(
    cli: Cli, command: list[str]
) -> None:
    result = cli(*command, "--model", cli.script([{"text": "ok"}]))
    line = _one_line_error(result, "UsageError")
    assert line == (
        "UsageError: the prompt is not UTF-8 text (unexpected end of data at byte 3); "
        "pass the text of the user's message as UTF-8"
    )
    assert not cli.store.exists()


def test_non_utf8_system_text_is_refused_like_a_non_utf8_system_file(cli: Cli) -> None:
    (cli.tmp / "system.txt").write_bytes(b"caf\xe9")
    model = cli.script([{"text": "ok"}])
    from_text = _one_line_error(
        cli("run", "hi", "--model", model, "--system", NOT_UTF8), "UsageError"
    )
    from_file = _one_line_error(
        cli("run", "hi", "--model", model, "--system", "@system.txt"), "UsageError"
    )
    reason = "is not UTF-8 text (unexpected end of data at byte 3); " + SYSTEM_FIX
    assert from_text == "UsageError: the --system text " + reason
    assert (
        from_file
        == "UsageError: the system prompt file 'system.txt' (from --system @system.txt) " + reason
    )
    assert not cli.store.exists()


@pytest.mark.parametrize("command", [["run", "hi"], ["chat"], ["resume", NOT_UTF8 + "-id", "hi"]])
def test_a_non_utf8_session_id_is_refused_before_anything_is_written(
    cli: Cli, command: list[str]
) -> None:
    session = ["--session", NOT_UTF8] if command[0] != "resume" else []
    result = cli(*command, *session, "--model", cli.script([{"text": "ok"}]))
    line = _one_line_error(result, "UsageError")
    assert "is not UTF-8 text" in line
    assert list(cli.store.glob("*/*")) == []
