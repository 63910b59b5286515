"""The PostgreSQL variant of scenario S (`run.py --store postgres`): one server for all.

Every run gets a fresh PostgreSQL schema of its own (`fresh_schema`), holding the tables the
framework creates there (each framework's connections set `search_path` to it), measured
when the run is over (`schema_bytes`: `pg_total_relation_size` of every table, with its
indexes and TOAST) and dropped after (`drop_schema`). The server is `PEERS_POSTGRES_URL`
(default `postgresql://127.0.0.1:5432/test`). Imports psycopg, which every driver of this
variant already needs (LangGraph's saver, SQLAlchemy's async engine, duraloop's store).
"""

from __future__ import annotations

import os
import uuid
from typing import Final

URL: Final = os.environ.get("PEERS_POSTGRES_URL", "postgresql://127.0.0.1:5432/test")


def fresh_schema() -> str:
    """Create a new, empty schema and return its name."""
    import psycopg
    from psycopg import sql

    name = f"peers_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(URL, autocommit=True) as connection:
        connection.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    return name


def conninfo(schema: str) -> str:
    """The server's connection string with `search_path` set to `schema`."""
    from psycopg.conninfo import make_conninfo

    return make_conninfo(URL, options=f"-c search_path={schema}")


def schema_bytes(schema: str) -> int:
    """Return the bytes of every table of `schema` (heap, indexes, TOAST)."""
    import psycopg

    query = (
        "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'"
    )
    with psycopg.connect(URL, autocommit=True) as connection:
        row = connection.execute(query, (schema,)).fetchone()
    return int(row[0]) if row is not None else 0


def drop_schema(schema: str) -> None:
    """Drop `schema` and everything in it."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(URL, autocommit=True) as connection:
        connection.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
        )


def server() -> str:
    """The server's version and durability settings, for the table's heading."""
    import psycopg

    names = ("server_version", "synchronous_commit", "fsync")
    with psycopg.connect(URL, autocommit=True) as connection:
        values = [connection.execute(f"SHOW {name}").fetchone() for name in names]
    return ", ".join(f"{n}={v[0] if v else '?'}" for n, v in zip(names, values, strict=True))


def sqlalchemy_url() -> str:
    """The server's URL for SQLAlchemy's async engine over psycopg 3."""
    scheme, rest = URL.split("://", 1)
    if scheme not in ("postgresql", "postgres"):
        raise ValueError(f"PEERS_POSTGRES_URL must be a postgresql:// URL, not {URL!r}")
    return f"postgresql+psycopg://{rest}"
