"""Leases: the PostgreSQL store's single writer per session, across machines (Law 8).

A writer takes a session's lease (`acquire`): its row in `leases` names the owner, carries a
fencing token that grows by one at every acquisition, and expires `seconds` after its last
renewal, by the database's clock (so machines' clocks never matter). An acquisition
succeeds only when the lease is free (released) or expired; then the token grows, and every
append of the old holder, which verifies its token in its own transaction (`fence`), is
refused: a process paused past its expiry (SIGSTOP, a GC pause, a partition) that wakes
after a takeover cannot write one event. An append also renews the lease, and a `Renewer`
thread renews every held lease a few times per period while a turn waits on a model or a
tool; a renewal that finds the token gone marks the lease lost, so the next append fails at
once without a round trip.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from duraloop.errors import SessionLockedError, WriterFencedError

from ._schema import postgres_statement

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

logger = logging.getLogger(__name__)

_ACQUIRE: Final = """
    INSERT INTO {s}.leases AS held (session_id, owner, token, expires_at)
    VALUES (%(id)s, %(owner)s, 1, now() + make_interval(secs => %(seconds)s))
    ON CONFLICT (session_id) DO UPDATE
        SET owner = EXCLUDED.owner, token = held.token + 1, expires_at = EXCLUDED.expires_at
        WHERE held.owner IS NULL OR held.expires_at < now()
    RETURNING token
"""
_HOLDER: Final = """
    SELECT owner, token, extract(epoch FROM expires_at - now())::float8
    FROM {s}.leases WHERE session_id = %s
"""
_RENEW: Final = """
    UPDATE {s}.leases SET expires_at = now() + make_interval(secs => %(seconds)s)
    WHERE session_id = %(id)s AND token = %(token)s AND owner = %(owner)s
    RETURNING token
"""
_RELEASE: Final = """
    UPDATE {s}.leases SET owner = NULL, expires_at = now()
    WHERE session_id = %(id)s AND token = %(token)s AND owner = %(owner)s
"""


@dataclass
class Lease:
    """A lease this process holds.

    Args:
        session_id: the session.
        owner: this backend's owner name (`host:pid:random`).
        token: the fencing token the acquisition got.
        lost: set once a renewal found the token gone (another writer took the session).
    """

    session_id: str
    owner: str
    token: int
    lost: bool = False

    def params(self, seconds: float) -> dict[str, Any]:
        """The statement parameters naming this lease."""
        return {"id": self.session_id, "owner": self.owner, "token": self.token, "seconds": seconds}


def acquire(
    connection: psycopg.Connection[Any], schema: str, session_id: str, owner: str, seconds: float
) -> Lease:
    """Take the session's lease in one statement (committed); return it.

    Raises:
        SessionLockedError: if another owner holds an unexpired lease; the message names
            it and how long it has left.
    """
    with connection.transaction():
        row = connection.execute(
            postgres_statement(_ACQUIRE, schema),
            {"id": session_id, "owner": owner, "seconds": seconds},
        ).fetchone()
        holder = (
            None if row else connection.execute(postgres_statement(_HOLDER, schema), (session_id,))
        )
        held = holder.fetchone() if holder is not None else None
    if row is not None:
        return Lease(session_id, owner, int(row[0]))
    who, token, left = held if held is not None else ("another writer", 0, 0.0)
    raise SessionLockedError(
        session_id, path=f"PostgreSQL lease {token} of {who}, {max(left, 0):.0f} s left"
    )


def fence(
    connection: psycopg.Connection[Any],
    schema: str,
    session_id: str,
    lease: Lease | None,
    seconds: float,
) -> None:
    """Verify and renew the writer's lease inside the caller's transaction.

    The row lock this takes orders the append with a concurrent takeover: whichever commits
    first wins, and a takeover that waited finds the lease renewed.

    A write without a lease (the backend's primitives used directly, as the contract tests
    do; a `SessionStore` always holds one) is allowed only while no one holds the session.

    Raises:
        WriterFencedError: if this writer's token is no longer the session's (another
            writer took over): nothing is written.
        SessionLockedError: if this process holds no lease and another writer holds one.
    """
    if lease is None:
        held = connection.execute(
            postgres_statement(_HOLDER + " FOR UPDATE", schema), (session_id,)
        )
        row = held.fetchone()
        if row is not None and row[0] is not None and row[2] > 0:
            raise SessionLockedError(
                session_id, path=f"PostgreSQL lease {row[1]} of {row[0]}, {row[2]:.0f} s left"
            )
        return
    if lease.lost:
        raise _fenced(connection, schema, lease, seconds)
    row = connection.execute(postgres_statement(_RENEW, schema), lease.params(seconds)).fetchone()
    if row is None:
        lease.lost = True
        raise _fenced(connection, schema, lease, seconds)


def _fenced(
    connection: psycopg.Connection[Any], schema: str, lease: Lease, seconds: float
) -> WriterFencedError:
    del seconds
    held = connection.execute(postgres_statement(_HOLDER, schema), (lease.session_id,)).fetchone()
    return WriterFencedError(
        session_id=lease.session_id,
        token=lease.token,
        holder=None if held is None else held[0],
        holder_token=None if held is None else int(held[1]),
    )


def release(connection: psycopg.Connection[Any], schema: str, lease: Lease) -> None:
    """Free the lease if this process still holds it (the token stays, to keep growing)."""
    with connection.transaction():
        connection.execute(postgres_statement(_RELEASE, schema), lease.params(0))


class Renewer:
    """A daemon thread renewing every held lease each `seconds / 3`.

    Args:
        pool: where it takes a connection for each round.
        schema: the store's schema.
        seconds: the lease period.
    """

    def __init__(self, pool: ConnectionPool[Any], schema: str, seconds: float) -> None:
        self._pool = pool
        self._schema = schema
        self._seconds = seconds
        self._held: dict[str, Lease] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def hold(self, lease: Lease) -> None:
        """Renew `lease` from now on (starts the thread on first use)."""
        with self._lock:
            self._held[lease.session_id] = lease
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="duraloop-lease-renewer", daemon=True
                )
                self._thread.start()

    def drop(self, session_id: str) -> Lease | None:
        """Stop renewing the session's lease; return it (None if not held)."""
        with self._lock:
            return self._held.pop(session_id, None)

    def held(self, session_id: str) -> Lease | None:
        """The lease held for the session, or None."""
        with self._lock:
            return self._held.get(session_id)

    def stop(self) -> None:
        """Stop the thread (held leases then expire unless released)."""
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=self._seconds)

    def _run(self) -> None:
        import psycopg

        while not self._stop.wait(self._seconds / 3):
            with self._lock:
                leases = [lease for lease in self._held.values() if not lease.lost]
            if not leases:
                continue
            try:
                with self._pool.connection() as connection:
                    for lease in leases:
                        renewed = connection.execute(
                            postgres_statement(_RENEW, self._schema), lease.params(self._seconds)
                        ).fetchone()
                        connection.commit()
                        if renewed is None:
                            lease.lost = True
                            logger.warning(
                                "session %s: the lease (token %d) was taken by another writer",
                                lease.session_id,
                                lease.token,
                            )
            except psycopg.Error as exc:  # the next round retries; an append still fences
                logger.warning("cannot renew the PostgreSQL leases: %s", exc)
