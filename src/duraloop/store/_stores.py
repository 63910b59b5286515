"""The ready-made stores: a SessionStore over memory, JSONL files or one SQLite file.

See docs/store.md#store-contract.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from ._jsonl._backend import Compression, JsonlBackend
from ._memory import MemoryBackend
from ._session_store import SessionStore

if TYPE_CHECKING:
    from ._sqlite._backend import SqliteBackend


class MemoryStore(SessionStore):
    """A SessionStore over process memory (tests, ephemeral sessions)."""

    def __init__(self) -> None:
        super().__init__(MemoryBackend())


class JsonlStore(SessionStore):
    """A SessionStore of JSONL files under `root`.

    See docs/store.md#jsonl-layout, #reading-and-torn-tails.

    Args:
        root: the store directory, e.g. `~/.duraloop/sessions`.
        pack_chunks: store runs of >= 3 chunk events as packed rows.
        compression: `"none"` (raw `session.jsonl`, the default) or `"zstd"`
            (`session.jsonl.zstd`: one checksummed frame per durable batch). A root holds one
            encoding; see `JsonlBackend`.

    Raises:
        ConfigError: if `compression` is not `"none"` or `"zstd"`.
    """

    def __init__(
        self, root: Path | str, *, pack_chunks: bool = True, compression: Compression = "none"
    ) -> None:
        super().__init__(JsonlBackend(root, pack_chunks=pack_chunks, compression=compression))


class SqliteStore(SessionStore):
    """A SessionStore of every session in one SQLite database (schema 17, dsh-compatible).

    The database is opened at construction, and a missing one created (mode 0600) then, or,
    with `create_on_open=False`, by the first write and never by a read. Call `close()`, or use
    the store as a context manager,
    to close it.

    Args:
        path: the database file, e.g. `~/.duraloop/sessions.db`.
        pack_chunks: store runs of >= 3 chunk events as packed rows.
        create_on_open: create a missing database now (True) or at the first write (False).

    Raises:
        StoreError: if the file is not a SQLite database, is damaged, fails the permission
            checks or is not a session store of schema 17 (see `SqliteBackend`).
    """

    def __init__(
        self, path: Path | str, *, pack_chunks: bool = True, create_on_open: bool = True
    ) -> None:
        from ._sqlite._backend import SqliteBackend  # deferred: JSONL never loads sqlite3

        self.sqlite: SqliteBackend = SqliteBackend(
            path, pack_chunks=pack_chunks, create_on_open=create_on_open
        )
        super().__init__(self.sqlite)

    def close(self) -> None:
        """Close the database connection; idempotent."""
        self.sqlite.close()

    def __enter__(self) -> SqliteStore:
        """Return the store itself."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Close the store."""
        self.close()
