"""The `--store` option: which session store a command opens (`DURALOOP_STORE`).

Syntax, `KIND:PATH` or a plain path:

- `DIR` or `jsonl:DIR`: a JSONL root (docs/store.md#jsonl-layout), ours or dsh's. An existing root
  is opened in the encoding its logs use (zstd if it holds a `session.jsonl.zstd`, raw otherwise); a
  new root is raw.
- `jsonl+zstd:DIR`: a JSONL root whose new logs are zstd-framed (dsh's default encoding).
- `sqlite:PATH`: a SQLite database file.
- `postgresql://USER@HOST:PORT/DB?schema=NAME` (or `postgres://`): a PostgreSQL store
  (docs/store.md#postgresql; the `postgres` extra), its tables in schema NAME (default
  `duraloop`). A password is best kept out of the URL (`PGPASSWORD` or `~/.pgpass`);
  one in it is never printed.

A prefix is a kind only when it is one of these, so `./my:dir` or `/a:b` is a path;
any other `word:` prefix is refused as an unknown kind rather than guessed to be a
directory. With no `--store` the root is `$DURALOOP_HOME/sessions` (`~/.duraloop/sessions`).
"""

from __future__ import annotations

import importlib
import os
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, cast

import typer

from ..errors import ConfigError, UsageError
from ..store import LOG_FILE_NAME, ZSTD_LOG_FILE_NAME

if TYPE_CHECKING:
    from ..store import SessionStore

StoreKind = Literal["jsonl", "jsonl+zstd", "sqlite", "postgresql"]
"""The kinds `--store` accepts before a colon."""

_KINDS: tuple[StoreKind, ...] = ("jsonl", "jsonl+zstd", "sqlite")
_POSTGRES_SCHEMES = ("postgresql://", "postgres://")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+._-]*):(.*)", re.DOTALL)
_SQLITE_MAGIC = b"SQLite format 3\x00"
_SYNTAX = "jsonl:DIR (or a plain DIR), jsonl+zstd:DIR, sqlite:PATH or postgresql://HOST/DB"


@dataclass(frozen=True, slots=True)
class StoreSpec:
    """A parsed `--store` value.

    Args:
        kind: the store kind.
        path: the JSONL root directory or the SQLite file (`~` expanded); unused for
            `postgresql`.
        url: the PostgreSQL URL as given (`postgresql` only).
    """

    kind: StoreKind
    path: Path
    url: str = ""

    def __str__(self) -> str:
        if self.kind == "postgresql":
            from ._postgres_url import without_password

            return without_password(self.url)
        return f"{self.kind}:{self.path}"


def parse_store_spec(text: str) -> StoreSpec:
    """Parse a `--store` value: `jsonl:DIR`, `jsonl+zstd:DIR`, `sqlite:PATH` or `DIR`.

    Args:
        text: the option or `DURALOOP_STORE` value.

    Returns:
        The kind and the path (`~` expanded; not resolved, not checked to exist).

    Raises:
        ConfigError: if the value is empty, names an unknown kind, or has an empty path.
    """
    if text.startswith(_POSTGRES_SCHEMES):
        return StoreSpec("postgresql", Path(), url=text)
    kind: StoreKind = "jsonl"
    rest = text
    match = _SCHEME.fullmatch(text)
    if match is not None:
        prefix, rest = match.group(1), match.group(2)
        if prefix not in _KINDS:
            raise ConfigError(
                f"unknown store kind {prefix!r} in {text!r}; use {_SYNTAX} (for a relative "
                f"directory whose name holds a colon, write ./{text})"
            )
        kind = cast(StoreKind, prefix)
    if not rest:
        raise ConfigError(f"no path in store {text!r}; use {_SYNTAX}")
    return StoreSpec(kind, Path(rest).expanduser())


def store_option(text: str) -> StoreSpec:
    """Parse `--store` for typer: a bad value is a usage error (exit 2, click's message).

    Raises:
        typer.BadParameter: if `parse_store_spec` refuses the value.
    """
    try:
        return parse_store_spec(text)
    except ConfigError as exc:
        raise typer.BadParameter(str(exc)) from exc


def default_store_spec() -> StoreSpec:
    """Return the store used without `--store`: `jsonl:$DURALOOP_HOME/sessions`."""
    home = Path(os.environ.get("DURALOOP_HOME") or Path.home() / ".duraloop")
    return StoreSpec("jsonl", home / "sessions")


def no_sessions_text(spec: StoreSpec | None) -> str:
    """Return what `duraloop ls` says of a store without sessions, naming it.

    Args:
        spec: the `--store` value; None for the default store.

    Returns:
        `no sessions in KIND:PATH`, plus `(PATH does not exist)` when it does not.
    """
    spec = spec if spec is not None else default_store_spec()
    if spec.kind == "postgresql":
        return f"no sessions in {spec}"
    missing = "" if spec.path.exists() else f" ({spec.path} does not exist)"
    return f"no sessions in {spec}{missing}"


_OPENED: list[StoreSpec] = []
"""The stores this command opened by `--store`/`DURALOOP_STORE` (a process runs one command)."""


def opened_store_text() -> str | None:
    """Return the `--store` value of the store this command opened; None for the default.

    Commands the CLI prints for the user to run next (a rescue fork, `chat --session CHILD`)
    carry it, so they work as printed.
    """
    return str(_OPENED[-1]) if _OPENED else None


_STORE_COMMAND = re.compile(
    r"`(duraloop (?:approve|check|deny|fork|ls|pending|resume|show)\b[^`]*)`"
)


def name_the_store(message: str) -> str:
    """Add the `--store` in use to each `duraloop check|fork|ls|resume|show|…` in `message`.

    Library errors name the commands that help (`duraloop check ID`); on a non-default store
    they work as printed only with its `--store`. A command that already names one, or ends
    in `-- ARG` (where an option would read as an argument), is left as it is.
    """
    store = opened_store_text()
    if store is None:
        return message
    flag = f" --store {shlex.quote(store)}"

    def add(match: re.Match[str]) -> str:
        command = match.group(1)
        if "--store" in command or " -- " in command:
            return match.group(0)
        return f"`{command}{flag}`"

    return _STORE_COMMAND.sub(add, message)


def open_store(spec: StoreSpec | None) -> SessionStore:
    """Open the store a command works on (every command goes through here).

    Args:
        spec: the parsed `--store`/`DURALOOP_STORE` value; None means the default root.

    Returns:
        A `JsonlStore` in the root's encoding, a SQLite store or a PostgreSQL store.

    Raises:
        UsageError: if a JSONL root is a file, a zstd root would be mixed into a raw one, or
            SQLite stores are not available in this build.
        ConfigError: if a PostgreSQL URL is malformed or psycopg is not installed.
        StoreError: if the PostgreSQL server cannot be reached.
    """
    from ..store import JsonlStore  # `--help` and `show FILE` never load the store

    if spec is not None:
        _OPENED.append(spec)
    spec = spec if spec is not None else default_store_spec()
    if spec.kind == "sqlite":
        return _sqlite_store(spec.path)
    if spec.kind == "postgresql":
        from ._postgres_url import postgres_store

        return postgres_store(spec.url)
    if spec.path.is_file():
        hint = (
            f"; it is a SQLite database: pass --store sqlite:{spec.path}"
            if _is_sqlite_file(spec.path)
            else ""
        )
        raise UsageError(f"store {spec} is a file, not a JSONL root directory{hint}")
    raw = _holds(spec.path, LOG_FILE_NAME)
    zstd = _holds(spec.path, ZSTD_LOG_FILE_NAME)
    if spec.kind == "jsonl+zstd" and raw:
        raise UsageError(
            f"store {spec}: the root already holds raw logs ({LOG_FILE_NAME}); one root holds "
            f"one encoding, so open it as jsonl:{spec.path} or use another directory for zstd"
        )
    if spec.kind == "jsonl+zstd" or zstd:
        return JsonlStore(spec.path, compression="zstd")
    return JsonlStore(spec.path)


def session_log_file(target: str) -> Path | None:
    """Return the session log a path names: the file itself, or the one in a session folder.

    `show`, `check` and `replay:` take a log file (ours, raw or zstd, or dsh's) or the
    session folder holding `session.jsonl` / `session.jsonl.zstd` (`~` expanded).

    Args:
        target: the command-line argument.

    Returns:
        The log file, or None when `target` is neither a file nor a folder holding a log
        (then it is a session id, or a folder without a log).
    """
    path = Path(target).expanduser()
    if path.is_file():
        return path
    if path.is_dir():
        for name in (LOG_FILE_NAME, ZSTD_LOG_FILE_NAME):
            if (path / name).is_file():
                return path / name
    return None


def _holds(root: Path, file_name: str) -> bool:
    """Whether any session under `root` (`<project>/<session>/<file_name>`) has that file."""
    return next(root.glob(f"*/*/{file_name}"), None) is not None


def _is_sqlite_file(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return handle.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC
    except OSError:
        return False


def _sqlite_store(path: Path) -> SessionStore:
    """Open `duraloop.store.SqliteStore(path)`, imported only when a command asks for it.

    Raises:
        UsageError: if this build has no SQLite store.
    """
    store_module = importlib.import_module("duraloop.store")
    factory: Callable[..., SessionStore] | None = getattr(store_module, "SqliteStore", None)
    if factory is None:
        raise UsageError(
            f"store sqlite:{path}: SQLite stores are not supported by this build of duraloop "
            "(duraloop.store.SqliteStore is missing); use jsonl:DIR"
        )
    # A missing database is created by the first write only: `ls`, `show`, `check` on a new
    # path find nothing and leave no file (E20).
    return factory(path, create_on_open=False)
