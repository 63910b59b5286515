"""`duraloop db init --store postgresql://...`: create or check a PostgreSQL store's tables.

See docs/store.md#postgresql. Opening a PostgreSQL store creates its tables when missing;
`db init` does it on purpose (e.g. before the first worker starts, by a user allowed to
create tables) and prints the store's schema and version, or the one line saying why it
cannot (an unreachable server, a schema of another version: exit 1).
"""

from __future__ import annotations

import typer

from ..errors import UsageError
from ._console import app, out
from ._options import StoreOption
from ._postgres_url import postgres_store

db_app = typer.Typer(
    help="Manage a database store (PostgreSQL).", no_args_is_help=True, add_completion=False
)
app.add_typer(db_app, name="db")


@db_app.command(
    name="init",
    help="Create the PostgreSQL store's tables if missing (in its schema) and check their "
    "version. Exit 1 if the server cannot be reached or the schema holds another version.",
)
def init(store: StoreOption = None) -> None:
    """Create or check the tables of `--store postgresql://...`."""
    if store is None or store.kind != "postgresql":
        raise UsageError(
            "db init is for a PostgreSQL store: pass --store postgresql://HOST/DB (JSONL and "
            "SQLite stores need no init)"
        )
    from ..worker import prepare_database
    from ._postgres_url import split_schema

    opened = postgres_store(store.url)
    url, schema = split_schema(store.url)
    dbos_schema = prepare_database(url, schema=schema)  # DBOS's too: none waits on them later
    out.print(
        f"PostgreSQL store {store} ready: schema {opened.postgres.schema!r}, "
        f"version {opened.SCHEMA_VERSION}, store id {opened.postgres.store_id}; DBOS tables "
        f"in {dbos_schema!r}",
        markup=False,
        highlight=False,
    )
