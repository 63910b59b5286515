"""SqliteStore: a SessionStore over one SQLite database file (session-spec 6.8)."""

from __future__ import annotations

from pathlib import Path
from types import TracebackType

from ._sqlite import SqliteBackend
from ._store import SessionStore


class SqliteStore(SessionStore):
    """A SessionStore of every session in one SQLite database (schema 17, dsh-compatible).

    The database is opened at construction, and a missing one created (mode 0600) then, or,
    with `create_on_open=False`, by the first write and never by a read. Call `close()`, or use the store as a context manager,
    to close it.

    Args:
        path: the database file, e.g. `~/.duraloop/sessions.db`.
        pack_chunks: store runs of >= 3 chunk events as packed rows.
        create_on_open: create a missing database now (True) or at the first write (False).

    Raises:
        StoreError: if the file is not a SQLite database, is damaged, fails the permission
            checks or is not a session store of schema 17 (see `SqliteBackend`).
    """

    def __init__(self, path: Path | str, *, pack_chunks: bool = True, create_on_open: bool = True) -> None:
        self.sqlite = SqliteBackend(path, pack_chunks=pack_chunks, create_on_open=create_on_open)
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
