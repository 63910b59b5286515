"""The PostgreSQL backend: every session of a store in one database (docs/store.md#postgresql).

One durable batch is one transaction: verify and renew the writer's lease (`_lease.fence`:
its fencing token must still be the session's), lock the session row and check the stored
next seq (a stale writer gets `AppendConflictError`), insert one row per storage record,
advance `next_seq` and `revision`, commit. A commit is durable when PostgreSQL says so
(`synchronous_commit` on, its default). Transactions are atomic, so a stored log never has a
torn tail: `read` reports none, a repair only appends closers (under the row lock, in the
same transaction as its lease check), and an undecodable row or a gap in the seqs is
corruption, never a crash's trace.

The writer lock of `StorageBackend.lock` is the session's lease (`_lease`), so the single
writer holds across processes and machines. Connections come from a `psycopg_pool`
connection pool; every method is synchronous, like every backend's (the loop flushes
inline, docs/scheduler.md#durability-before-a-body). Snapshots are not kept yet: a resume
reads the whole log.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final

from duraloop.errors import (
    CorruptLogError,
    SessionExistsError,
    SessionFormatUnsupportedError,
    SessionLockedError,
    SessionNotFoundError,
    StoreError,
)
from duraloop.log import Event, SessionHeader

from .._backend import DamagedLog, StoredLog, WriteReceipt
from .._codec._records import (
    RecordError,
    decode_header,
    decode_record,
    encode_header,
    encode_records,
)
from .._writer import check_batch
from ._lease import Lease, Renewer, acquire, fence, release
from ._schema import Payload, check_payload, check_schema_name, ensure_schema, postgres_statement

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

DEFAULT_LEASE_SECONDS: Final = 30.0
"""How long a lease lasts without renewal: a dead writer's sessions are free after it."""

_INSERT_SESSION: Final = (
    "INSERT INTO {s}.sessions (id, header, incarnation, next_seq, revision) "
    "VALUES (%s, %s, %s, 0, 0) ON CONFLICT (id) DO NOTHING RETURNING id"
)
_INSERT_RECORD: Final = (
    "INSERT INTO {s}.events (session_id, seq, last_seq, writer_token, record) "
    "VALUES (%s, %s, %s, %s, %s)"
)
_INSERT_JSONB: Final = _INSERT_RECORD.replace("%s)", "%s::text::jsonb)")
_SELECT_RECORDS: Final = (
    "SELECT seq, record FROM {s}.events WHERE session_id = %s ORDER BY seq",
    "SELECT seq, record::text FROM {s}.events WHERE session_id = %s ORDER BY seq",
)
_LOCK_SESSION: Final = "SELECT next_seq FROM {s}.sessions WHERE id = %s FOR UPDATE"
_ADVANCE: Final = "UPDATE {s}.sessions SET next_seq = %s, revision = revision + 1 WHERE id = %s"


class PostgresBackend:
    """Session logs in one PostgreSQL database, in the tables of one schema.

    Args:
        url: a libpq connection string or URL (`postgresql://host:port/db?...`).
        schema: the PostgreSQL schema holding the store's tables (created if missing).
        pack_chunks: store runs of >= 3 chunk events as one packed row.
        lease_seconds: the lease period (`DEFAULT_LEASE_SECONDS`); a writer renews it a
            few times per period and at every append.
        pool_size: the most connections the store opens.
        owner: the name its leases carry (default `host:pid:random`; a worker passes its
            DBOS executor id, so a lease names the worker that holds it).
        payload: private (the benchmarks' comparison, issue 14): the type of the record
            column, `"bytea"` (the JSONL line's bytes, the default) or `"jsonb"` (the line
            sent as JSON text, read back as `record::text`). A store keeps its type in `meta`.

    Raises:
        StoreError: if the database cannot be reached, the tables cannot be created, or the
            schema holds a store of another version or payload type.
    """

    def __init__(
        self,
        url: str,
        *,
        schema: str = "duraloop",
        pack_chunks: bool = True,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        pool_size: int = 4,
        owner: str | None = None,
        payload: Payload = "bytea",
    ) -> None:
        import psycopg
        from psycopg_pool import ConnectionPool

        self.schema = check_schema_name(schema)
        self.payload: Payload = check_payload(payload)
        self.pack_chunks = pack_chunks
        self.lease_seconds = lease_seconds
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._where = _redacted(url)
        try:  # one direct connection first: an unreachable server fails at once, by name
            with psycopg.connect(url, connect_timeout=10) as connection:
                self.store_id = ensure_schema(connection, self.schema, self.payload)
        except psycopg.Error as exc:
            raise StoreError(
                f"cannot open the PostgreSQL store {self._where}: {_one_line(exc)}"
            ) from exc
        self._pool: ConnectionPool[Any] = ConnectionPool(
            url, min_size=1, max_size=pool_size, open=True, timeout=10, name="duraloop"
        )
        self._renewer = Renewer(self._pool, self.schema, lease_seconds)
        self._closed = threading.Event()

    def close(self) -> None:
        """Release the held leases, stop renewing, close the pool; idempotent."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._renewer.stop()
        self._pool.close()

    @contextlib.contextmanager
    def _transaction(self, what: str) -> Iterator[psycopg.Connection[Any]]:
        import psycopg
        from psycopg_pool import PoolTimeout

        if self._closed.is_set():
            raise StoreError(f"the PostgreSQL store {self._where} is closed")
        try:
            with self._pool.connection() as connection, connection.transaction():
                yield connection
        except (psycopg.Error, PoolTimeout) as exc:
            raise StoreError(
                f"PostgreSQL store {self._where}: cannot {what}: {_one_line(exc)}"
            ) from exc

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """Lend a pooled connection (the worker layer's tables share the store's database)."""
        with self._pool.connection() as connection:
            yield connection

    def _q(self, text: str) -> Any:
        return postgres_statement(text, self.schema)

    def read(self, session_id: str) -> StoredLog:
        """Read a session's header and records in one transaction; see `StorageBackend.read`."""
        with self._transaction(f'read session "{session_id}"') as connection:
            row = connection.execute(
                self._q("SELECT header FROM {s}.sessions WHERE id = %s"), (session_id,)
            ).fetchone()
            if row is None:
                raise SessionNotFoundError(session_id)
            records = connection.execute(
                self._q(_SELECT_RECORDS[self.payload == "jsonb"]), (session_id,)
            ).fetchall()
        header = decode_header(bytes(row[0]), path=self._where)
        return StoredLog(header, self._decoded(session_id, records))

    def _decoded(self, session_id: str, records: Sequence[tuple[Any, ...]]) -> list[Event]:
        events: list[Event] = []
        for seq, record in records:
            try:
                decoded = decode_record(
                    record.encode() if isinstance(record, str) else bytes(record)
                )
            except RecordError as exc:
                raise CorruptLogError(
                    f'session "{session_id}": the record at seq {seq} cannot be read ({exc})',
                    path=self._where,
                ) from exc
            if decoded[0].seq != len(events) or seq != len(events):
                raise CorruptLogError(
                    f'session "{session_id}": the records are not contiguous at seq {seq} '
                    f"(expected {len(events)})",
                    path=self._where,
                )
            events.extend(decoded)
        return events

    def exists(self, session_id: str) -> bool:
        """Return whether the session has a row (it was materialized)."""
        with self._transaction(f'look up session "{session_id}"') as connection:
            found = connection.execute(
                self._q("SELECT 1 FROM {s}.sessions WHERE id = %s"), (session_id,)
            ).fetchone()
        return found is not None

    def revision(self, session_id: str) -> str | None:
        """Return `postgres:<store id>:<incarnation>:<revision>`, or None when not stored."""
        with self._transaction(f'read the revision of session "{session_id}"') as connection:
            row = connection.execute(
                self._q("SELECT incarnation, revision FROM {s}.sessions WHERE id = %s"),
                (session_id,),
            ).fetchone()
        return None if row is None else f"postgres:{self.store_id}:{row[0]}:{row[1]}"

    def materialize(self, header: SessionHeader, batch: Sequence[Event]) -> WriteReceipt:
        """Insert the session row and first batch in one fenced transaction (`StorageBackend`)."""
        check_batch(header.id, batch, 0)
        with self._transaction(f'create session "{header.id}"') as connection:
            fence(
                connection,
                self.schema,
                header.id,
                self._renewer.held(header.id),
                self.lease_seconds,
            )
            created = connection.execute(
                self._q(_INSERT_SESSION), (header.id, encode_header(header)[:-1], uuid.uuid4())
            ).fetchone()
            if created is None:
                raise SessionExistsError(
                    f'session "{header.id}" already has a persisted log; resume it instead'
                )
            written = self._insert(connection, header.id, batch, 0)
        return WriteReceipt(written, 1)

    def append(self, session_id: str, batch: Sequence[Event]) -> WriteReceipt:
        """Append one batch as one fenced transaction; see `StorageBackend.append`.

        Raises:
            WriterFencedError: if this writer's lease was taken over; nothing is stored.
            AppendConflictError: if the batch does not start at the stored next seq.
            SessionNotFoundError: if the session has no row.
            StoreError: if PostgreSQL fails; nothing is stored.
        """
        if not batch:
            return WriteReceipt(0, 0)
        with self._transaction(f'append to session "{session_id}"') as connection:
            fence(
                connection,
                self.schema,
                session_id,
                self._renewer.held(session_id),
                self.lease_seconds,
            )
            at = self._next_seq(connection, session_id)
            written = self._insert(connection, session_id, batch, at)
        return WriteReceipt(written, 1)

    def _next_seq(self, connection: psycopg.Connection[Any], session_id: str) -> int:
        row = connection.execute(self._q(_LOCK_SESSION), (session_id,)).fetchone()
        if row is None:
            raise SessionNotFoundError(session_id)
        return int(row[0])

    def _insert(
        self, connection: psycopg.Connection[Any], session_id: str, batch: Sequence[Event], at: int
    ) -> int:
        """Insert `batch` after checking it starts at `at`; return the bytes stored."""
        check_batch(session_id, batch, at)
        lease = self._renewer.held(session_id)
        token = 0 if lease is None else lease.token
        records = encode_records(batch, pack_chunks=self.pack_chunks)
        jsonb = self.payload == "jsonb"
        with connection.cursor() as cursor:
            cursor.executemany(
                self._q(_INSERT_JSONB if jsonb else _INSERT_RECORD),
                [
                    (session_id, first, last, token, line.decode() if jsonb else line)
                    for first, last, line in records
                ],
            )
        connection.execute(self._q(_ADVANCE), (at + len(batch), session_id))
        return sum(len(line) for _, _, line in records)

    def repair(self, session_id: str, torn: int | None, events: Sequence[Event]) -> WriteReceipt:
        """Append closers in one fenced transaction; see `StorageBackend.repair`.

        Raises:
            StoreError: if `torn` is not None (this backend never reports a torn tail).
            AppendConflictError: if `events` do not continue the stored log.
        """
        if torn is not None:
            raise StoreError(
                f'session "{session_id}": a PostgreSQL log has no torn tail to cut (seq {torn})'
            )
        if not events:
            return WriteReceipt(0, 0)
        return self.append(session_id, events)

    def read_snapshot(self, session_id: str) -> None:
        """Keep no snapshots yet (see `StorageBackend.read_snapshot`): always None."""
        return None

    def merge_frames(self, session_id: str) -> int:
        """Store no frames (see `StorageBackend.merge_frames`): always 0."""
        return 0

    def write_snapshot(self, session_id: str, events: int, body: bytes) -> bool:
        """Keep no snapshots yet (see `StorageBackend.write_snapshot`): always False."""
        return False

    def list_headers(self) -> list[SessionHeader | DamagedLog]:
        """Return every session's header, oldest first; see `StorageBackend.list_headers`."""
        with self._transaction("list sessions") as connection:
            rows = connection.execute(
                self._q("SELECT id, header FROM {s}.sessions ORDER BY created")
            ).fetchall()
        headers: list[SessionHeader | DamagedLog] = []
        for session_id, header in rows:
            try:
                headers.append(decode_header(bytes(header), path=self._where))
            except (CorruptLogError, SessionFormatUnsupportedError) as exc:
                headers.append(DamagedLog(str(session_id), f"invalid sessions row ({exc})"))
        return headers

    def lock(self, session_id: str, *, cwd: str | None) -> Callable[[], None]:
        """Take the session's lease; return the function that releases it (`StorageBackend`).

        Raises:
            SessionLockedError: if another writer holds an unexpired lease.
            StoreError: if PostgreSQL fails.
        """
        del cwd
        held = self._renewer.held(session_id)
        if held is not None:
            raise SessionLockedError(
                session_id, path=f"PostgreSQL lease {held.token} of {held.owner}, this store"
            )
        with self._transaction(f'take the lease of session "{session_id}"') as connection:
            lease = acquire(connection, self.schema, session_id, self.owner, self.lease_seconds)
        self._renewer.hold(lease)
        released = False

        def free() -> None:
            nonlocal released
            if released:
                return
            released = True
            if self._renewer.drop(session_id) is lease and not self._closed.is_set():
                with self._transaction(f'release the lease of session "{session_id}"') as c:
                    release(c, self.schema, lease)

        return free

    def lease(self, session_id: str) -> Lease | None:
        """The lease this store holds for the session, or None."""
        return self._renewer.held(session_id)


def _redacted(url: str) -> str:
    """The URL without its password, for messages."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    try:
        parts = conninfo_to_dict(url)
    except psycopg.ProgrammingError:  # reported by the pool's connect
        return "(an unparsable connection string)"
    host = parts.get("host", "localhost")
    return f"postgresql://{host}:{parts.get('port', 5432)}/{parts.get('dbname', '')}"


def _one_line(exc: BaseException) -> str:
    """The error's message on one line (libpq's span several)."""
    return " ".join(str(exc).split()) or type(exc).__name__
