"""`--store postgresql://...`: the URL's `schema` parameter, and a URL safe to print.

See docs/store.md#postgresql. libpq knows no `schema` parameter, so it is taken out of the
URL and becomes `PostgresStore(schema=...)`; every other parameter goes to libpq as given.
A password in the URL is dropped from every URL the CLI prints.
"""

from __future__ import annotations

import atexit
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..errors import ConfigError

if TYPE_CHECKING:
    from ..store import PostgresStore

DEFAULT_SCHEMA = "duraloop"


def split_schema(url: str) -> tuple[str, str]:
    """Return the URL without its `schema` parameter, and that schema (default `duraloop`).

    Raises:
        ConfigError: if the URL cannot be parsed or names `schema` twice or empty.
    """
    try:
        parts = urlsplit(url)
        query = parse_qsl(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
    except ValueError as exc:
        raise ConfigError(f"invalid PostgreSQL URL {without_password(url)!r}: {exc}") from exc
    schemas = [value for key, value in query if key == "schema"]
    if len(schemas) > 1 or (schemas and not schemas[0]):
        raise ConfigError(
            f"PostgreSQL URL {without_password(url)!r}: give `schema=NAME` once, not empty"
        )
    rest = urlencode([(key, value) for key, value in query if key != "schema"])
    return urlunsplit(parts._replace(query=rest)), schemas[0] if schemas else DEFAULT_SCHEMA


_SECRET_PARAMETERS = frozenset({"password", "sslpassword"})
"""libpq parameters whose value is a secret, dropped from every URL the CLI prints."""


def without_password(url: str) -> str:
    """Return `url` without any password.

    `user:secret@host` becomes `user@host`; the `password` and `sslpassword` query
    parameters are dropped.
    """
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        query = parse_qsl(parts.query, keep_blank_values=True)
    except ValueError:
        return "postgresql://(an unparsable URL)"
    if "@" in netloc:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.partition(':')[0]}@{host}"
    kept = [(key, value) for key, value in query if key not in _SECRET_PARAMETERS]
    if len(kept) != len(query):
        parts = parts._replace(query=urlencode(kept))
    return urlunsplit(parts._replace(netloc=netloc))


def postgres_store(url: str) -> PostgresStore:
    """Open the `PostgresStore` a URL names; it is closed when the process exits.

    Raises:
        ConfigError: if the URL is malformed or psycopg is not installed.
        StoreError: if the server cannot be reached or the schema is of another version.
    """
    from ..store import PostgresStore

    libpq_url, schema = split_schema(url)
    store = PostgresStore(libpq_url, schema=schema)
    atexit.register(store.close)
    return store
