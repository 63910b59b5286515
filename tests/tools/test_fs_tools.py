"""Built-in file tools on a real temporary workspace, driven through the pipeline.

Confinement is the property that matters: `..`, absolute paths outside and symlinks that
point outside must all be refused with `PATH_OUTSIDE_WORKSPACE`, and nothing outside the
workspace may be read or written (the race and hard-link cases are in `test_fsopen.py`).
No tool may block on a FIFO (issue 9 item 8): a watchdog thread opens the FIFO after a few
seconds, which releases a tool stuck in `open`, so a regression fails instead of hanging.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from duraloop.tools._builtins import builtin_tools
from duraloop.tools._fs_tools import MAX_OUTPUT_BYTES
from duraloop.tools._outcome import ToolOutcome
from duraloop.tools._pipeline import ToolPipeline
from duraloop.tools._registry import ToolRegistry
from duraloop.tools._request import ToolCallRequest
from duraloop.tools._signal import CancelSignal


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("import os\nprint('hello')\n")
    (root / "notes.txt").write_text("one\ntwo\nthree\n")
    (tmp_path / "secret.txt").write_text("outside secret\n")
    return root


async def _call(workspace: Path, name: str, **arguments: object) -> ToolOutcome:
    pipeline = ToolPipeline(ToolRegistry(builtin_tools()), cwd=workspace, session_id="s")
    call = ToolCallRequest(
        call_id="c",
        name=name,
        raw_arguments=json.dumps(arguments),
        arguments=arguments,
        turn=1,
        step=1,
    )
    signal = CancelSignal()
    return await pipeline.finalize(call, await pipeline.dispatch(call, signal), signal)


def _code(outcome: ToolOutcome) -> str | None:
    return None if outcome.error is None else outcome.error["code"]


def test_builtin_tools_classification() -> None:
    modes = {t.name: t.is_parallel({}) for t in builtin_tools()}
    assert modes == {
        "read_file": True,
        "list_dir": True,
        "grep": True,
        "write_file": False,
        "edit_file": False,
        "bash": False,
    }


@pytest.mark.anyio
async def test_read_file_returns_content_and_line_window(workspace: Path) -> None:
    assert (await _call(workspace, "read_file", path="notes.txt")).text == "one\ntwo\nthree\n"
    window = await _call(workspace, "read_file", path="notes.txt", start_line=2, max_lines=1)
    assert window.text == "two\n"


@pytest.mark.anyio
async def test_read_file_large_file_is_truncated_with_note(workspace: Path) -> None:
    line = "x" * 1023 + "\n"
    (workspace / "big.txt").write_text(line * 300)
    outcome = await _call(workspace, "read_file", path="big.txt")
    assert not outcome.is_error
    assert len(outcome.text.encode()) < MAX_OUTPUT_BYTES + 200
    assert outcome.text.endswith("read on with start_line=257]")


@pytest.mark.anyio
async def test_read_file_missing_is_fs_not_found(workspace: Path) -> None:
    outcome = await _call(workspace, "read_file", path="nope.txt")
    assert _code(outcome) == "FS_NOT_FOUND"
    assert "nope.txt" in outcome.text


@pytest.mark.anyio
@pytest.mark.parametrize("name", ["read_file", "list_dir", "grep", "write_file", "edit_file"])
@pytest.mark.parametrize("path", ["../secret.txt", "src/../../secret.txt", "/etc/passwd"])
async def test_fs_tools_refuse_paths_outside_workspace(
    workspace: Path, name: str, path: str
) -> None:
    arguments: dict[str, object] = {"path": path}
    if name == "grep":
        arguments["pattern"] = "secret"
    if name == "write_file":
        arguments["content"] = "pwned"
    if name == "edit_file":
        arguments.update(old="outside", new="pwned")
    outcome = await _call(workspace, name, **arguments)
    assert _code(outcome) == "PATH_OUTSIDE_WORKSPACE"
    assert "outside the workspace" in outcome.text
    assert "outside secret" not in outcome.text
    assert (workspace.parent / "secret.txt").read_text() == "outside secret\n"


@pytest.mark.anyio
async def test_fs_tools_refuse_symlink_pointing_outside(workspace: Path) -> None:
    (workspace / "link.txt").symlink_to(workspace.parent / "secret.txt")
    (workspace / "linkdir").symlink_to(workspace.parent)
    read = await _call(workspace, "read_file", path="link.txt")
    assert _code(read) == "PATH_OUTSIDE_WORKSPACE"
    write = await _call(workspace, "write_file", path="linkdir/new.txt", content="x")
    assert _code(write) == "PATH_OUTSIDE_WORKSPACE"
    assert not (workspace.parent / "new.txt").exists()
    listing = await _call(workspace, "list_dir", path="linkdir")
    assert _code(listing) == "PATH_OUTSIDE_WORKSPACE"
    found = await _call(workspace, "grep", pattern="secret")
    assert found.text == "no matches"


@pytest.mark.anyio
async def test_list_dir_marks_directories(workspace: Path) -> None:
    assert (await _call(workspace, "list_dir")).text == "notes.txt\nsrc/"
    assert (await _call(workspace, "list_dir", path="src")).text == "a.py"
    missing = await _call(workspace, "list_dir", path="nope")
    assert _code(missing) == "FS_NOT_FOUND"


@pytest.mark.anyio
async def test_grep_finds_matches_with_glob(workspace: Path) -> None:
    outcome = await _call(workspace, "grep", pattern="o")
    assert outcome.text.splitlines() == [
        "notes.txt:1:one",
        "notes.txt:2:two",
        "src/a.py:1:import os",
        "src/a.py:2:print('hello')",
    ]
    only_py = await _call(workspace, "grep", pattern="o", glob="*.py")
    assert only_py.text.splitlines() == ["src/a.py:1:import os", "src/a.py:2:print('hello')"]
    bad = await _call(workspace, "grep", pattern="(")
    assert _code(bad) == "GREP_INVALID_PATTERN"


@pytest.mark.anyio
async def test_grep_skips_binary_files_and_says_so(workspace: Path) -> None:
    (workspace / "blob.bin").write_bytes(b"one\xff\xfe\n")
    outcome = await _call(workspace, "grep", pattern="one")
    assert outcome.text.splitlines() == [
        "notes.txt:1:one",
        "[skipped 1 unreadable or non-text files]",
    ]


@pytest.mark.anyio
async def test_write_file_creates_parents_and_overwrites(workspace: Path) -> None:
    outcome = await _call(workspace, "write_file", path="deep/er/x.txt", content="héllo")
    assert outcome.text == "wrote 6 bytes to deep/er/x.txt"
    assert (workspace / "deep" / "er" / "x.txt").read_text() == "héllo"
    await _call(workspace, "write_file", path="deep/er/x.txt", content="bye")
    assert (workspace / "deep" / "er" / "x.txt").read_text() == "bye"


@pytest.mark.anyio
async def test_edit_file_replaces_exactly_one_occurrence(workspace: Path) -> None:
    outcome = await _call(workspace, "edit_file", path="notes.txt", old="two", new="2")
    assert not outcome.is_error
    assert (workspace / "notes.txt").read_text() == "one\n2\nthree\n"


@pytest.mark.anyio
async def test_edit_file_missing_or_ambiguous_text_is_refused(workspace: Path) -> None:
    (workspace / "dup.txt").write_text("a a")
    missing = await _call(workspace, "edit_file", path="dup.txt", old="b", new="c")
    assert _code(missing) == "FS_EDIT_NOT_FOUND"
    ambiguous = await _call(workspace, "edit_file", path="dup.txt", old="a", new="c")
    assert _code(ambiguous) == "FS_AMBIGUOUS_EDIT"
    assert "2 times" in ambiguous.text
    empty = await _call(workspace, "edit_file", path="dup.txt", old="", new="c")
    assert _code(empty) == "INVALID_ARGS"
    assert (workspace / "dup.txt").read_text() == "a a"


@pytest.mark.anyio
@pytest.mark.parametrize("name", ["read_file", "write_file", "edit_file", "list_dir", "grep"])
async def test_fs_tools_refuse_a_nul_byte_in_a_path_with_a_code(workspace: Path, name: str) -> None:
    arguments: dict[str, object] = {"path": "a\x00b"}
    if name == "grep":
        arguments["pattern"] = "x"
    if name == "write_file":
        arguments["content"] = "x"
    if name == "edit_file":
        arguments.update(old="x", new="y")
    outcome = await _call(workspace, name, **arguments)
    assert _code(outcome) == "PATH_INVALID"
    assert "NUL byte" in outcome.text


@pytest.mark.anyio
async def test_write_file_with_an_empty_path_names_the_path(workspace: Path) -> None:
    outcome = await _call(workspace, "write_file", path="", content="x")
    assert _code(outcome) == "FS_NOT_A_FILE"
    assert (
        outcome.text == "Error: path '' names the directory ., not a file; give the path of a file"
    )


@contextmanager
def _fifo_watchdog(fifo: Path, after_seconds: float = 5.0) -> Iterator[threading.Event]:
    """Open `fifo` read-write after `after_seconds` unless the block ended first; that
    releases any `open` blocked on it. The yielded event is set if the watchdog fired."""
    done = threading.Event()
    fired = threading.Event()

    def watch() -> None:
        if not done.wait(after_seconds):
            fired.set()
            os.close(os.open(fifo, os.O_RDWR | os.O_NONBLOCK))

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield fired
    finally:
        done.set()
        thread.join()


_FIFO_CALLS: list[tuple[str, dict[str, object], str, str]] = [
    ("read_file", {"path": "f"}, "FS_NOT_A_FILE", "a FIFO (named pipe), not a regular file"),
    ("write_file", {"path": "f", "content": "x"}, "FS_NOT_A_FILE", "a FIFO"),
    ("edit_file", {"path": "f", "old": "a", "new": "b"}, "FS_NOT_A_FILE", "a FIFO"),
    ("list_dir", {"path": "f"}, "FS_NOT_A_DIRECTORY", "a FIFO (named pipe), not a directory"),
    ("grep", {"pattern": "x", "path": "f"}, "FS_NOT_A_FILE", "a FIFO"),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("name", "arguments", "code", "says"), _FIFO_CALLS)
async def test_fs_tools_refuse_a_fifo_without_blocking(
    workspace: Path, name: str, arguments: dict[str, object], code: str, says: str
) -> None:
    os.mkfifo(workspace / "f")
    with _fifo_watchdog(workspace / "f") as fired:
        outcome = await _call(workspace, name, **arguments)
    assert not fired.is_set()
    assert _code(outcome) == code
    assert says in outcome.text


@pytest.mark.anyio
async def test_fs_tools_refuse_a_fifo_behind_a_symlink_without_blocking(workspace: Path) -> None:
    os.mkfifo(workspace / "f")
    (workspace / "link").symlink_to("f")
    with _fifo_watchdog(workspace / "f") as fired:
        read = await _call(workspace, "read_file", path="link")
        write = await _call(workspace, "write_file", path="link", content="x")
    assert not fired.is_set()
    assert (_code(read), _code(write)) == ("FS_NOT_A_FILE", "FS_NOT_A_FILE")


@pytest.mark.anyio
async def test_grep_and_list_dir_walk_past_a_fifo_and_a_socket_and_grep_counts_them(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    os.mkfifo(workspace / "src" / "f")
    monkeypatch.chdir(workspace)  # a socket path is limited to ~107 bytes: bind it relatively
    with socket.socket(socket.AF_UNIX) as server:
        server.bind("s.sock")
        with _fifo_watchdog(workspace / "src" / "f") as fired:
            found = await _call(workspace, "grep", pattern="o")
            listing = await _call(workspace, "list_dir", path="src")
            sock = await _call(workspace, "read_file", path="s.sock")
    assert not fired.is_set()
    assert found.text.splitlines() == [
        "notes.txt:1:one",
        "notes.txt:2:two",
        "src/a.py:1:import os",
        "src/a.py:2:print('hello')",
        "[skipped 2 FIFOs, sockets or devices]",
    ]
    assert listing.text == "a.py\nf"
    assert _code(sock) == "FS_NOT_A_FILE"
    assert "a socket, not a regular file" in sock.text


@pytest.mark.anyio
async def test_grep_with_a_glob_does_not_count_special_files_it_would_not_search(
    workspace: Path,
) -> None:
    os.mkfifo(workspace / "f")
    found = await _call(workspace, "grep", pattern="import", glob="*.py")
    assert found.text == "src/a.py:1:import os"


@pytest.mark.anyio
async def test_read_file_and_write_file_refuse_a_directory_with_a_code(workspace: Path) -> None:
    read = await _call(workspace, "read_file", path="src")
    assert _code(read) == "FS_NOT_A_FILE"
    assert read.text == "Error: src is a directory; use list_dir"
    edit = await _call(workspace, "edit_file", path="src", old="a", new="b")
    assert _code(edit) == "FS_NOT_A_FILE"
