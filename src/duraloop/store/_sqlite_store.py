"""SqliteStore: a SessionStore over one SQLite database file (session-spec 6.8)."""

from __future__ import annotations

from pathlib import Path
from types import TracebackType

from ._sqlite import SqliteBackend
from ._store import SessionStore


class SqliteStore(SessionStore):
    """A SessionStore of every session in one SQLite database (schema 17, dsh-compatible).

    The database is opened (created with mode 0600 if missing) at construction; call
    `close()`, or use the store as a context manager, to close it.

    Args:
        path: the database file, e.g. `~/.duraloop/sessions.db`.
        pack_chunks: store runs of >= 3 chunk events as packed rows.

    Raises:
        StoreError: if the file fails the permission checks or is not a session store of
            schema 17 (see `SqliteBackend`).
    """

    def __init__(self, path: Path | str, *, pack_chunks: bool = True) -> None:
        self.sqlite = SqliteBackend(path, pack_chunks=pack_chunks)
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
