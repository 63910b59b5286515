"""`duraloop chat`'s stdin: raw lines read without blocking the event loop."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

import anyio

_READ_SIZE = 4096


async def read_stdin_lines(on_line: Callable[[bytes], None]) -> None:
    """Call `on_line` with each line of stdin (without its newline); return at EOF.

    A pipe or a terminal is awaited on the event loop; a regular file (which cannot be
    polled) is read in a worker thread. A last line without a newline is still a line.

    Args:
        on_line: called with each line's bytes, in order.
    """
    fd = sys.stdin.fileno()
    pending = b""
    pollable = True
    while True:
        if pollable:
            try:
                await anyio.wait_readable(fd)
            except OSError:
                pollable = False
        chunk = (
            os.read(fd, _READ_SIZE)
            if pollable
            else await anyio.to_thread.run_sync(os.read, fd, _READ_SIZE)
        )
        pending += chunk
        *lines, pending = pending.split(b"\n")
        if not chunk and pending:
            lines.append(pending)
        for data in lines:
            on_line(data)
        if not chunk:
            return
