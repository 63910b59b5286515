"""The ready-made stores: a SessionStore over memory, JSONL files, SQLite or PostgreSQL.

See docs/store.md#store-contract.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, ClassVar, Protocol, Self, cast

from duraloop.errors import ConfigError

from ._backend import StorageBackend
from ._jsonl._backend import Compression, JsonlBackend
from ._memory import MemoryBackend
from ._postgres._schema import SCHEMA_VERSION
from ._session_store import SessionStore

if TYPE_CHECKING:
    from ._postgres._backend import PostgresBackend
    from ._postgres._schema import Payload
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


class _Closable(Protocol):
    def close(self) -> None: ...


class _ClosingStore(SessionStore):
    """A store over a backend holding connections: `close()` it, or use it as a context manager.

    Args:
        backend: the storage; its `close()` is the store's.
    """

    def __init__(self, backend: StorageBackend) -> None:
        super().__init__(backend)
        self._closable = cast(_Closable, backend)

    def close(self) -> None:
        """Close the store's connections (and stop its lease renewals); idempotent."""
        self._closable.close()

    def __enter__(self) -> Self:
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


class SqliteStore(_ClosingStore):
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


class PostgresStore(_ClosingStore):
    """A SessionStore of every session in one PostgreSQL database (docs/store.md#postgresql).

    Needs the `postgres` extra (`pip install 'duraloop[postgres]'`: psycopg 3 and
    psycopg_pool). The store's tables are created, in `schema`, when missing. The writer
    lock is a lease with a fencing token, so one writer per session holds across machines
    (docs/store.md#leases). Call `close()`, or use the store as a context manager.

    Args:
        url: a libpq connection string or URL, e.g. `postgresql://127.0.0.1:5432/app`.
        schema: the PostgreSQL schema of the store's tables (default `duraloop`).
        pack_chunks: store runs of >= 3 chunk events as one packed row.
        lease_seconds: a lease's period: a writer that stops renewing (a crash, a pause)
            loses its sessions this long after its last renewal.
        pool_size: the most connections the store opens.
        owner: the name the store's leases carry (default `host:pid:random`).
        payload: private, for the benchmarks (issue 14): the record column's type, `"bytea"`
            (the default) or `"jsonb"`; see `PostgresBackend`.

    Raises:
        ConfigError: if psycopg is not installed (the message names the extra).
        StoreError: if the database cannot be reached, the tables cannot be created, or
            `schema` holds a store of another schema version.
    """

    SCHEMA_VERSION: ClassVar[int] = SCHEMA_VERSION
    """The version of the tables this duraloop creates and reads."""

    def __init__(
        self,
        url: str,
        *,
        schema: str = "duraloop",
        pack_chunks: bool = True,
        lease_seconds: float = 30.0,
        pool_size: int = 4,
        owner: str | None = None,
        payload: Payload = "bytea",
    ) -> None:
        try:
            from ._postgres._backend import PostgresBackend
        except ImportError as exc:
            raise ConfigError(
                f"the PostgreSQL store needs psycopg 3 and psycopg_pool ({exc}): install "
                "them with `pip install 'duraloop[postgres]'`"
            ) from exc
        self.postgres: PostgresBackend = PostgresBackend(
            url,
            schema=schema,
            pack_chunks=pack_chunks,
            lease_seconds=lease_seconds,
            pool_size=pool_size,
            owner=owner,
            payload=payload,
        )
        super().__init__(self.postgres)
