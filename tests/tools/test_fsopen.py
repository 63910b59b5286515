"""Workspace confinement of the file tools, walked through directory descriptors.

Pins issue 9 item 16: a path is opened component by component from a descriptor of the
workspace with `O_NOFOLLOW`, so a symlink swapped in between a check and a use cannot lead
a read or a write outside (the race tests run a real swapping thread against real tool
bodies), a hard link to an outside file is neither read nor written, and a symlink loop or
an over-long name is a coded `PATH_INVALID` result. Symlinks that stay inside the
workspace are followed, as a user expects.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from duraloop.errors import ToolError
from duraloop.tools._context import ToolContext
from duraloop.tools._definition import Tool
from duraloop.tools._fs_tools import edit_file, grep, list_dir, read_file, write_file
from duraloop.tools._signal import CancelSignal

SECRET = "outside secret\n"


@pytest.fixture
def workspace(real_tmp_path: Path) -> Path:
    root = real_tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("import os\n")
    (root / "notes.txt").write_text("one\ntwo\n")
    (real_tmp_path / "outside").mkdir()
    (real_tmp_path / "outside" / "secret.txt").write_text(SECRET)
    return root


async def _run(tool: Tool, workspace: Path, **arguments: object) -> str:
    """Run a tool body as the pipeline does; return its text or `code: message`."""
    ctx = ToolContext(
        cwd=workspace, signal=CancelSignal(), call_id="c", tool_name=tool.name, session_id="s"
    )
    try:
        return str(await tool.body(tool.validator(arguments), ctx))
    except ToolError as exc:
        return f"{exc.code}: {exc.message}"


def _code(text: str) -> str:
    return text.split(":", 1)[0]


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(first: Path, second: Path) -> None:
    """Swap two names atomically (Linux `renameat2(RENAME_EXCHANGE)`), so neither is ever
    missing while the other takes its place."""
    libc = ctypes.CDLL(None, use_errno=True)
    result = libc.renameat2(
        _AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE
    )
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), str(first))


@contextmanager
def _swapping(workspace: Path, outside: Path) -> Iterator[Counter[str]]:
    """Swap `sub` (a directory <-> a symlink to `outside`) and `f.txt` (a file <-> a symlink
    to the outside secret) in a thread until the block ends; count the swaps."""
    (workspace / "sub").mkdir()
    (workspace / "sub" / "f.txt").write_text("inside\n")
    (workspace / "f.txt").write_text("inside\n")
    (outside / "f.txt").write_text(SECRET)  # what `sub/f.txt` names once `sub` is the link
    (workspace / "sub.evil").symlink_to(outside)
    (workspace / "f.evil").symlink_to(outside / "secret.txt")
    stop = threading.Event()
    swaps: Counter[str] = Counter()

    def swap() -> None:
        while not stop.is_set():
            for name, evil in (("sub", "sub.evil"), ("f.txt", "f.evil")):
                _exchange(workspace / name, workspace / evil)
                swaps[name] += 1

    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # interleave the threads finely, so the race is exercised
    thread = threading.Thread(target=swap, daemon=True)
    thread.start()
    try:
        yield swaps
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(old_interval)


@pytest.mark.anyio
async def test_read_file_never_escapes_through_a_symlink_swapped_in_1000_reads(
    workspace: Path,
) -> None:
    outside = workspace.parent / "outside"
    seen: Counter[str] = Counter()
    with _swapping(workspace, outside) as swaps:
        for index in range(1000):
            text = await _run(read_file, workspace, path=("f.txt", "sub/f.txt")[index % 2])
            assert "outside secret" not in text
            seen["inside" if text == "inside\n" else _code(text)] += 1
    assert swaps["sub"] > 0
    assert seen["inside"] > 0  # both states were met: the swap raced the reads
    assert seen["PATH_OUTSIDE_WORKSPACE"] > 0
    assert set(seen) == {"inside", "PATH_OUTSIDE_WORKSPACE"}


@pytest.mark.anyio
async def test_write_file_and_edit_file_never_escape_through_a_symlink_swapped_in_300_writes(
    workspace: Path,
) -> None:
    outside = workspace.parent / "outside"
    writes: Counter[str] = Counter()
    edits: Counter[str] = Counter()
    with _swapping(workspace, outside):
        for index in range(300):
            path = ("f.txt", "sub/f.txt", "sub/new.txt")[index % 3]
            text = await _run(write_file, workspace, path=path, content="inside\n")
            writes["wrote" if text.startswith("wrote") else _code(text)] += 1
            edited = await _run(edit_file, workspace, path=path, old="inside", new="inside")
            edits["edited" if edited.startswith("edited") else _code(edited)] += 1
    assert sorted(p.name for p in outside.iterdir()) == ["f.txt", "secret.txt"]
    assert (outside / "secret.txt").read_text() == SECRET
    assert (outside / "f.txt").read_text() == SECRET
    assert writes["wrote"] > 0  # both states were met: the swap raced the writes
    assert writes["PATH_OUTSIDE_WORKSPACE"] > 0
    assert set(writes) == {"wrote", "PATH_OUTSIDE_WORKSPACE"}
    # FS_NOT_FOUND: an edit of sub/new.txt whose write met the link and was refused.
    assert set(edits) <= {"edited", "PATH_OUTSIDE_WORKSPACE", "FS_NOT_FOUND"}
    assert edits["edited"] > 0


@pytest.mark.anyio
async def test_a_hard_link_to_an_outside_file_is_neither_read_nor_written(
    workspace: Path,
) -> None:
    secret = workspace.parent / "outside" / "secret.txt"
    os.link(secret, workspace / "linked.txt")
    read = await _run(read_file, workspace, path="linked.txt")
    assert _code(read) == "FS_HARD_LINK"
    assert "2 hard links" in read
    write = await _run(write_file, workspace, path="linked.txt", content="pwned")
    assert _code(write) == "FS_HARD_LINK"
    edit = await _run(edit_file, workspace, path="linked.txt", old="secret", new="pwned")
    assert _code(edit) == "FS_HARD_LINK"
    found = await _run(grep, workspace, pattern="secret")
    assert found.splitlines() == ["no matches", "[skipped 1 files with more than one hard link]"]
    assert secret.read_text() == SECRET


@pytest.mark.anyio
async def test_a_hard_linked_file_inside_the_workspace_is_refused_too(workspace: Path) -> None:
    os.link(workspace / "notes.txt", workspace / "twin.txt")
    read = await _run(read_file, workspace, path="notes.txt")
    assert _code(read) == "FS_HARD_LINK"
    assert (workspace / "notes.txt").read_text() == "one\ntwo\n"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        (read_file, {}),
        (write_file, {"content": "x"}),
        (edit_file, {"old": "a", "new": "b"}),
        (list_dir, {}),
        (grep, {"pattern": "x"}),
    ],
    ids=lambda value: value.name if isinstance(value, Tool) else "",
)
@pytest.mark.parametrize("path", ["self", "ping/x.txt"])
async def test_a_symlink_loop_is_path_invalid(
    workspace: Path, tool: Tool, arguments: dict[str, object], path: str
) -> None:
    (workspace / "self").symlink_to("self")
    (workspace / "ping").symlink_to("pong")
    (workspace / "pong").symlink_to("ping")
    text = await _run(tool, workspace, path=path, **arguments)
    assert _code(text) == "PATH_INVALID"
    assert "symlink loop" in text


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        (read_file, {}),
        (write_file, {"content": "x"}),
        (edit_file, {"old": "a", "new": "b"}),
        (list_dir, {}),
        (grep, {"pattern": "x"}),
    ],
    ids=lambda value: value.name if isinstance(value, Tool) else "",
)
@pytest.mark.parametrize("path", ["n" * 256, "src/" + "n" * 256 + "/x.txt", "a/" * 2049])
async def test_an_over_long_name_or_path_is_path_invalid(
    workspace: Path, tool: Tool, arguments: dict[str, object], path: str
) -> None:
    text = await _run(tool, workspace, path=path, **arguments)
    assert _code(text) == "PATH_INVALID"
    assert sorted(os.listdir(workspace)) == ["notes.txt", "src"]


@pytest.mark.anyio
async def test_a_path_that_cannot_be_encoded_is_path_invalid(workspace: Path) -> None:
    text = await _run(read_file, workspace, path="bad\ud800.txt")
    assert _code(text) == "PATH_INVALID"


@pytest.mark.anyio
async def test_symlinks_that_stay_inside_the_workspace_are_followed(workspace: Path) -> None:
    (workspace / "link.txt").symlink_to("notes.txt")
    (workspace / "srclink").symlink_to(workspace / "src")  # absolute, inside
    (workspace / "src" / "up.txt").symlink_to("../notes.txt")
    assert await _run(read_file, workspace, path="link.txt") == "one\ntwo\n"
    assert await _run(read_file, workspace, path="src/up.txt") == "one\ntwo\n"
    assert await _run(read_file, workspace, path="srclink/a.py") == "import os\n"
    assert await _run(list_dir, workspace, path="srclink") == "a.py\nup.txt"
    wrote = await _run(write_file, workspace, path="link.txt", content="new\n")
    assert wrote == "wrote 4 bytes to notes.txt"
    assert (workspace / "notes.txt").read_text() == "new\n"
    assert (workspace / "link.txt").is_symlink()


@pytest.mark.anyio
async def test_a_dangling_symlink_inside_is_written_through_to_its_target(
    workspace: Path,
) -> None:
    (workspace / "later.txt").symlink_to("src/made.txt")
    assert await _run(write_file, workspace, path="later.txt", content="x") == (
        "wrote 1 bytes to src/made.txt"
    )
    assert (workspace / "src" / "made.txt").read_text() == "x"


@pytest.mark.anyio
async def test_paths_that_leave_and_reenter_the_workspace_stay_usable(workspace: Path) -> None:
    assert await _run(read_file, workspace, path="../ws/notes.txt") == "one\ntwo\n"
    assert await _run(read_file, workspace, path=str(workspace / "notes.txt")) == "one\ntwo\n"
    assert await _run(read_file, workspace, path="src/../notes.txt") == "one\ntwo\n"


@pytest.mark.anyio
async def test_relative_and_absolute_symlinks_out_of_the_workspace_are_refused(
    workspace: Path,
) -> None:
    (workspace / "rel").symlink_to("../outside/secret.txt")
    (workspace / "abs").symlink_to(workspace.parent / "outside")
    (workspace / "src" / "deep").symlink_to("../../outside")
    for path in ("rel", "abs/secret.txt", "src/deep/secret.txt"):
        text = await _run(read_file, workspace, path=path)
        assert _code(text) == "PATH_OUTSIDE_WORKSPACE", path
        assert "outside secret" not in text
    made = await _run(write_file, workspace, path="src/deep/new.txt", content="x")
    assert _code(made) == "PATH_OUTSIDE_WORKSPACE"
    assert sorted(p.name for p in (workspace.parent / "outside").iterdir()) == ["secret.txt"]


@pytest.mark.anyio
async def test_a_trailing_slash_names_a_directory(workspace: Path) -> None:
    text = await _run(read_file, workspace, path="notes.txt/")
    assert _code(text) == "FS_NOT_A_DIRECTORY"
    assert await _run(list_dir, workspace, path="src/") == "a.py"


@pytest.mark.anyio
async def test_write_file_creates_no_directory_for_a_path_that_names_none(
    workspace: Path,
) -> None:
    for path in ("newdir/", "newdir/../x.txt"):
        text = await _run(write_file, workspace, path=path, content="x")
        assert _code(text) == "FS_NOT_FOUND", path
    assert sorted(os.listdir(workspace)) == ["notes.txt", "src"]
