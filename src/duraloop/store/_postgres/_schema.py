"""The PostgreSQL store's schema: created and versioned by the store (docs/store.md#postgresql).

Every table lives in one PostgreSQL schema (`duraloop` by default; tests use one each):

- `meta`: `schema_version` (this module's `SCHEMA_VERSION`), `store_id` (a UUID naming
  this store in revisions) and `payload` (the type of `events.record`; a schema without the
  key predates it and holds bytea).
- `sessions`: one row per materialized session: its header record (the JSONL header line),
  `incarnation` (a UUID per materialization), `next_seq` (the stored length) and `revision`
  (bumped by every write), and `created` (insertion order, for listing).
- `events`: one row per storage record, keyed `(session_id, seq)` by the record's first seq:
  one event, or a packed run of chunks up to `last_seq`; `record` is the JSONL line as bytea
  (or, with the private `payload="jsonb"` of the benchmarks, as jsonb: `meta`'s `payload`
  names the type) and `writer_token` the fencing token of the lease it was written under
  (every event is attributable to its writer).
- `leases`: one row per session ever written: `owner`, the fencing `token` (it only grows),
  and `expires_at`; see `_lease`.

`ensure_schema` creates what is missing, under a transaction-scoped advisory lock so that
concurrent first opens do not race, and refuses a schema of another version with the
command that fixes it.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, Final, Literal

from duraloop.errors import StoreError

if TYPE_CHECKING:
    import psycopg
    from psycopg.sql import Composed

SCHEMA_VERSION: Final = 1
"""The layout this module creates and reads."""
_LOCK_KEY: Final = 0x64757261  # "dura": the advisory lock of schema creation

Payload = Literal["bytea", "jsonb"]
"""The type of `events.record`: the JSONL line as bytes (the default), or as jsonb."""
PAYLOADS: Final[tuple[Payload, ...]] = ("bytea", "jsonb")

_DDL: Final = (
    "CREATE SCHEMA IF NOT EXISTS {s}",
    "CREATE TABLE IF NOT EXISTS {s}.meta (key text PRIMARY KEY, value text NOT NULL)",
    """CREATE TABLE IF NOT EXISTS {s}.sessions (
        id text PRIMARY KEY,
        header bytea NOT NULL,
        incarnation uuid NOT NULL,
        next_seq bigint NOT NULL,
        revision bigint NOT NULL,
        created bigserial NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS {s}.events (
        session_id text NOT NULL REFERENCES {s}.sessions (id) ON DELETE CASCADE,
        seq bigint NOT NULL,
        last_seq bigint NOT NULL,
        writer_token bigint NOT NULL,
        record {payload} NOT NULL,
        PRIMARY KEY (session_id, seq)
    )""",
    """CREATE TABLE IF NOT EXISTS {s}.leases (
        session_id text PRIMARY KEY,
        owner text,
        token bigint NOT NULL,
        expires_at timestamptz NOT NULL
    )""",
)


def check_schema_name(schema: str) -> str:
    """Return `schema` if it can name the store's PostgreSQL schema.

    Raises:
        StoreError: if it is empty, longer than 63 bytes or holds a NUL.
    """
    if not schema or len(schema.encode()) > 63 or "\0" in schema:
        raise StoreError(f"invalid PostgreSQL schema name {schema!r}: use 1-63 bytes")
    return schema


def check_payload(payload: str) -> Payload:
    """Return `payload` if it names a record column type (`PAYLOADS`).

    Raises:
        StoreError: otherwise.
    """
    for known in PAYLOADS:
        if payload == known:
            return known
    raise StoreError(f"invalid PostgreSQL payload type {payload!r}: use 'bytea' or 'jsonb'")


def postgres_statement(text: str, schema: str, payload: Payload = "bytea") -> Composed:
    """Return `text` with `{s}` replaced by the quoted identifier of `schema`.

    `{payload}`, in the DDL only, becomes the record column's type (a keyword, not data).
    """
    from psycopg import sql

    if "{payload}" in text:
        return sql.SQL(text).format(s=sql.Identifier(schema), payload=sql.SQL(payload))
    return sql.SQL(text).format(s=sql.Identifier(schema))


def ensure_schema(
    connection: psycopg.Connection[Any], schema: str, payload: Payload = "bytea"
) -> str:
    """Create the store's tables if missing, check the version; return the store id.

    Args:
        connection: an idle connection; the creation is one transaction it commits.
        schema: the PostgreSQL schema that holds the store.
        payload: the type of `events.record` a new store gets and an existing one must have.

    Raises:
        StoreError: if the schema holds a store of another version or payload type (the
            message says what to do), or the database refuses the statements (e.g. no
            CREATE privilege).
    """
    import psycopg

    try:
        with connection.transaction():
            connection.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
            for text in _DDL:
                connection.execute(postgres_statement(text, schema, payload))
            found = connection.execute(
                postgres_statement("SELECT key, value FROM {s}.meta", schema)
            )
            rows = {str(key): str(value) for key, value in found.fetchall()}
            if not rows:
                rows = {
                    "schema_version": str(SCHEMA_VERSION),
                    "store_id": str(uuid.uuid4()),
                    "payload": payload,
                }
                insert = "INSERT INTO {s}.meta (key, value) VALUES (%s, %s), (%s, %s), (%s, %s)"
                connection.execute(
                    postgres_statement(insert, schema), [v for pair in rows.items() for v in pair]
                )
    except psycopg.Error as exc:
        detail = " ".join(str(exc).split())
        raise StoreError(
            f"cannot create the duraloop tables in schema {schema!r}: {detail}"
        ) from exc
    version = rows.get("schema_version")
    if version != str(SCHEMA_VERSION):
        raise StoreError(
            f"PostgreSQL schema {schema!r} holds a duraloop store of schema version {version}; "
            f"this duraloop reads version {SCHEMA_VERSION}: use a duraloop of that version, or "
            "another schema (`--store postgresql://...?schema=NAME`)"
        )
    stored = rows.get("payload", "bytea")
    if stored != payload:
        raise StoreError(
            f"PostgreSQL schema {schema!r} holds a duraloop store whose records are {stored}, "
            f"not {payload}: open it with payload={stored!r}, or use another schema"
        )
    return rows["store_id"]
