"""`--store KIND:PATH` (and `DURALOOP_STORE`): every command on every kind of store.

Real `python -m duraloop` subprocesses. Kinds: `jsonl:DIR` and a plain `DIR` (raw for a new
root, the existing encoding otherwise), `jsonl+zstd:DIR`, `sqlite:PATH`, and a dsh JSONL root
built here by hand in dsh's on-disk layout (docs/store.md#jsonl-layout), raw and zstd.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import zstandard

import duraloop.store
from duraloop.cli._stores import StoreSpec, parse_store_spec
from duraloop.errors import ConfigError

from ._support import Cli, clean_env, ok, session_id_of

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "dsh-sessions"
HAS_SQLITE = hasattr(duraloop.store, "SqliteStore")


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    c = Cli(tmp_path)
    (c.cwd / "a.txt").write_text("alpha\n", encoding="utf-8")
    return c


def _at(cli: Cli, spec: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run a store command with an explicit `--store spec` (and `--cwd` where it applies)."""
    extra = ["--cwd", str(cli.cwd)] if args[0] in ("run", "resume") else []
    return cli(*args, "--store", spec, *extra, store=False, cwd=False)


def _every_command(
    cli: Cli, spec: str, *, existing: str | None = None, prompt: str | None = None
) -> None:
    """Drive run, ls, show, check, resume, fork and run --session on one store."""
    if existing is None:
        script = cli.script(
            [
                {"tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "a.txt"}}]},
                {"text": "Read it."},
            ]
        )
        session_id = session_id_of(ok(_at(cli, spec, "run", "Read a.txt.", "--model", script)))
        prompt = "Read a.txt."
    else:
        session_id = existing
    assert prompt is not None
    listed = json.loads(ok(_at(cli, spec, "ls", "--json")).stdout)
    assert session_id in [row["id"] for row in listed]
    assert all("damaged" not in row for row in listed), listed
    shown = ok(_at(cli, spec, "show", session_id)).stdout
    assert f"session {session_id}" in shown and prompt in shown
    assert '"valid": true' in ok(_at(cli, spec, "check", session_id, "--json")).stdout
    assert "nothing to repair" in ok(_at(cli, spec, "resume", session_id)).stdout
    resumed = ok(
        _at(
            cli, spec, "resume", session_id, "Again?", "--model", cli.script([{"text": "Resumed."}])
        )
    )
    assert "Resumed." in resumed.stdout
    child = ok(_at(cli, spec, "fork", session_id)).stdout.strip()
    assert "Resumed." in ok(_at(cli, spec, "show", child)).stdout
    more = ok(
        _at(
            cli,
            spec,
            "run",
            "More.",
            "--session",
            child,
            "--model",
            cli.script([{"text": "Child."}]),
        )
    )
    assert session_id_of(more) == child
    events = [
        json.loads(line)
        for line in ok(_at(cli, spec, "show", child, "--events", "--json")).stdout.splitlines()
    ]
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert events[-1]["type"] == "turn/end" and events[-1]["data"]["reason"] == {
        "kind": "completed"
    }
    ok(_at(cli, spec, "check", child))


def _logs(root: Path, name: str) -> list[Path]:
    return sorted(root.glob(f"*/*/{name}"))


# --- parsing ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/var/s", StoreSpec("jsonl", Path("/var/s"))),
        ("rel/dir", StoreSpec("jsonl", Path("rel/dir"))),
        ("jsonl:/var/s", StoreSpec("jsonl", Path("/var/s"))),
        ("jsonl+zstd:/var/s", StoreSpec("jsonl+zstd", Path("/var/s"))),
        ("sqlite:/var/s.db", StoreSpec("sqlite", Path("/var/s.db"))),
        ("jsonl:/var/a:b", StoreSpec("jsonl", Path("/var/a:b"))),
        ("/var/a:b", StoreSpec("jsonl", Path("/var/a:b"))),
        ("./a:b", StoreSpec("jsonl", Path("a:b"))),
        ("sqlite:~/s.db", StoreSpec("sqlite", Path.home() / "s.db")),
    ],
)
def test_store_spec_syntax(text: str, expected: StoreSpec) -> None:
    assert parse_store_spec(text) == expected


@pytest.mark.parametrize(
    "text", ["", "jsonl:", "sqlite:", "postgres:db", "SQLite:x.db", "zstd:/var/s"]
)
def test_store_spec_refusals(text: str) -> None:
    with pytest.raises(
        ConfigError, match=r"jsonl:DIR .*jsonl\+zstd:DIR, sqlite:PATH or postgresql://HOST/DB"
    ):
        parse_store_spec(text)


def test_an_unknown_kind_is_a_usage_error_exit_2(cli: Cli) -> None:
    result = _at(cli, "sqlit:x.db", "ls")
    assert result.returncode == 2
    message = " ".join(result.stderr.replace("│", " ").split())  # click's boxed, wrapped text
    assert "Invalid value for '--store'" in message and "unknown store kind 'sqlit'" in message
    assert result.stdout == ""


def test_a_file_as_jsonl_root_is_refused_and_a_sqlite_file_is_named(cli: Cli) -> None:
    database = cli.tmp / "sessions.db"
    database.write_bytes(b"SQLite format 3\x00" + bytes(100))
    result = _at(cli, str(database), "ls")
    assert result.returncode == 1 and result.stdout == ""
    assert "is a file, not a JSONL root directory" in result.stderr
    assert f"--store sqlite:{database}" in result.stderr


# --- jsonl: raw and zstd -----------------------------------------------------------------------


def test_jsonl_kind_and_a_plain_dir_are_the_same_raw_store(cli: Cli) -> None:
    _every_command(cli, f"jsonl:{cli.store}")
    created = _logs(cli.store, "session.jsonl")
    assert len(created) == 2 and _logs(cli.store, "session.jsonl.zstd") == []
    session_id = created[0].parent.name
    assert "valid" in ok(_at(cli, str(cli.store), "check", session_id)).stdout


def test_jsonl_zstd_creates_a_zstd_root_that_a_plain_dir_then_opens_as_zstd(cli: Cli) -> None:
    first = session_id_of(
        ok(
            _at(
                cli,
                f"jsonl+zstd:{cli.store}",
                "run",
                "hi",
                "--model",
                cli.script([{"text": "Hi."}]),
            )
        )
    )
    assert [p.parent.name for p in _logs(cli.store, "session.jsonl.zstd")] == [first]
    _every_command(cli, str(cli.store))  # detected: new sessions in this root stay zstd
    _every_command(cli, f"jsonl:{cli.store}", existing=first, prompt="hi")
    assert len(_logs(cli.store, "session.jsonl.zstd")) == 4
    assert _logs(cli.store, "session.jsonl") == []


def test_jsonl_zstd_on_a_raw_root_is_refused_before_anything_is_written(cli: Cli) -> None:
    ok(_at(cli, str(cli.store), "run", "hi", "--model", cli.script([{"text": "Hi."}])))
    before = sorted(cli.store.rglob("*"))
    result = _at(
        cli, f"jsonl+zstd:{cli.store}", "run", "again", "--model", cli.script([{"text": "No."}])
    )
    assert result.returncode == 1
    assert "already holds raw logs" in result.stderr and f"jsonl:{cli.store}" in result.stderr
    assert sorted(cli.store.rglob("*")) == before


def test_duraloop_store_env_var_is_the_default_and_store_overrides_it(cli: Cli) -> None:
    env = clean_env(cli.tmp, DURALOOP_STORE=f"jsonl+zstd:{cli.tmp / 'from-env'}")
    result = ok(cli("run", "hi", "--model", cli.script([{"text": "Hi."}]), store=False, env=env))
    session_id = session_id_of(result)
    assert len(_logs(cli.tmp / "from-env", "session.jsonl.zstd")) == 1
    assert session_id in ok(cli("ls", store=False, env=env)).stdout
    # An explicit --store wins over the environment.
    assert session_id not in ok(cli("ls", "--store", str(cli.store), store=False, env=env)).stdout
    # Without either, the default root is $DURALOOP_HOME/sessions.
    ok(cli("run", "hi", "--model", cli.script([{"text": "Hi."}]), store=False))
    assert len(_logs(cli.tmp / "home" / "sessions", "session.jsonl")) == 1


# --- sqlite ----------------------------------------------------------------------------------


@pytest.mark.skipif(not HAS_SQLITE, reason="duraloop.store.SqliteStore is not in this build yet")
def test_sqlite_store_runs_every_command(cli: Cli) -> None:
    database = cli.tmp / "sessions.db"
    _every_command(cli, f"sqlite:{database}")
    assert database.is_file()
    assert _logs(cli.tmp, "session.jsonl") == []


@pytest.mark.skipif(HAS_SQLITE, reason="duraloop.store.SqliteStore exists")
def test_sqlite_without_support_is_a_one_line_usage_error(cli: Cli) -> None:
    result = _at(cli, f"sqlite:{cli.tmp / 'sessions.db'}", "ls")
    assert result.returncode == 1 and result.stdout == ""
    assert (
        result.stderr.startswith("UsageError: ")
        and "SQLite stores are not supported" in result.stderr
    )
    assert not (cli.tmp / "sessions.db").exists()


# --- a dsh JSONL root ----------------------------------------------------------------------------

DSH_ID = "dsh/run~1 é"
"""An id that exercises dsh's segment encoding (`/`, `~`, a space, a non-ASCII character)."""

_SAFE = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


def _units(text: str) -> list[int]:
    data = text.encode("utf-16-le", "surrogatepass")
    return [int.from_bytes(data[i : i + 2], "little") for i in range(0, len(data), 2)]


def _dsh_segment(value: str) -> str:
    """dsh's `encodeSegment` (docs/store.md#jsonl-layout), written independently of duraloop's."""
    return "".join(chr(u) if chr(u) in _SAFE else f"~{u:04X}" for u in _units(value))


def _dsh_project_key(cwd: str) -> str:
    """dsh's `projectKey` (docs/store.md#jsonl-layout) for the cwd."""
    slug = ""
    for unit in _units(cwd):
        char = chr(unit)
        if char in "/\\:":
            slug += "" if slug.endswith("-") else "-"
        else:
            slug += char if char in _SAFE else f"~{unit:04X}"
    return f"--{slug.lstrip('-') or 'root'}--"


def _dsh_lines(fixture: Path, *, session_id: str, cwd: str) -> list[bytes]:
    """Turn a projected fixture back into the lines dsh's backend writes: seq/time restored."""
    text = fixture.read_text(encoding="utf-8")
    text = text.replace("{{cwd}}", cwd).replace('"{{sessionId}}"', json.dumps(session_id))
    rows = [json.loads(line) for line in text.splitlines() if line]
    header = {**rows[0], "id": session_id, "cwd": cwd, "createdAt": 1_783_352_050_000}
    lines = [json.dumps(header, ensure_ascii=False).encode()]
    seq = 0
    for row in rows[1:]:
        if row["type"].endswith("-chunks"):
            members = len(row["data"].get("texts") or row["data"].get("args"))
            stored: dict[str, Any] = {
                "type": row["type"],
                "seq0": seq,
                "time0": 1_783_352_050_000 + seq,
            }
            seq += members
        else:
            stored = {"type": row["type"], "seq": seq, "time": 1_783_352_050_000 + seq}
            seq += 1
        stored.update({k: v for k, v in row.items() if k != "type"})
        lines.append(json.dumps(stored, ensure_ascii=False).encode())
    return lines


def _dsh_root(cli: Cli, fixture_name: str, *, zstd: bool) -> tuple[str, str]:
    """Write one fixture into a dsh root at `cli.store`; return the session id and its prompt."""
    fixture = FIXTURES / fixture_name / "session.jsonl"
    if not fixture.is_file():
        pytest.skip(f"dsh fixtures not found at {FIXTURES}")
    cwd = str(cli.cwd)
    lines = _dsh_lines(fixture, session_id=DSH_ID, cwd=cwd)
    directory = cli.store / _dsh_project_key(cwd) / _dsh_segment(DSH_ID)
    directory.mkdir(parents=True)
    if zstd:
        codec = zstandard.ZstdCompressor(write_checksum=True)
        batches = [lines[:1]] + [lines[i : i + 7] for i in range(1, len(lines), 7)]
        data = b"".join(
            codec.compress(b"".join(line + b"\n" for line in batch)) for batch in batches
        )
        (directory / "session.jsonl.zstd").write_bytes(data)
    else:
        (directory / "session.jsonl").write_bytes(b"".join(line + b"\n" for line in lines))
    first_user = next(
        json.loads(line) for line in lines[1:] if json.loads(line)["type"] == "user/message"
    )
    return DSH_ID, str(first_user["data"]["content"][0]["text"])


def test_a_raw_dsh_root_works_with_every_command(cli: Cli) -> None:
    session_id, prompt = _dsh_root(cli, "parallel-tool-calls", zstd=False)
    _every_command(cli, str(cli.store), existing=session_id, prompt=prompt)
    assert len(_logs(cli.store, "session.jsonl")) == 2


def test_a_zstd_dsh_root_works_with_every_command(cli: Cli) -> None:
    session_id, prompt = _dsh_root(cli, "packed-chunks", zstd=True)
    _every_command(cli, f"jsonl:{cli.store}", existing=session_id, prompt=prompt)
    assert (
        len(_logs(cli.store, "session.jsonl.zstd")) == 2 and _logs(cli.store, "session.jsonl") == []
    )


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_reading_commands_on_a_new_store_path_create_no_file(cli: Cli, kind: str) -> None:
    # E20: `duraloop ls --store sqlite:NEW` created the database file.
    target = cli.tmp / ("new.db" if kind == "sqlite" else "new-root")
    spec = f"{kind}:{target}"
    assert json.loads(ok(_at(cli, spec, "ls", "--json")).stdout) == []
    for command in (("show", "nope"), ("check", "nope"), ("resume", "nope")):
        failed = _at(cli, spec, *command)
        assert failed.returncode == 1 and "SessionNotFoundError" in failed.stderr, failed.stderr
    assert sorted(p.name for p in cli.tmp.iterdir() if p.name.startswith("new")) == []


def test_sqlite_store_on_a_text_file_says_it_is_not_a_database_not_chmod(cli: Cli) -> None:
    # E20: a 0644 notes.json was refused with "run `chmod 600`" before "not a database".
    notes = cli.tmp / "notes.json"
    notes.write_text('{"notes": []}\n', encoding="utf-8")
    notes.chmod(0o644)
    failed = _at(cli, f"sqlite:{notes}", "ls")
    assert failed.returncode == 1 and failed.stdout == ""
    assert "is not a SQLite database" in failed.stderr and "chmod" not in failed.stderr
    assert notes.read_text(encoding="utf-8") == '{"notes": []}\n'


def test_ls_on_a_sqlite_store_with_a_damaged_page_lists_that_session_damaged_and_the_other(
    cli: Cli,
) -> None:
    # Issue 9 item 13: one damaged events page made `ls` exit 1 for the whole store.
    from store.test_sqlite_damage import _damage, _page_holding, _root_page, _two_sessions

    db = cli.tmp / "db" / "db.sqlite"
    _two_sessions(db)
    sessions_db = cli.tmp / "sessions-damaged" / "db.sqlite"
    _two_sessions(sessions_db)
    _damage(db, _page_holding(db, b"first-session 15 "))
    assert "damaged: session" in ok(_at(cli, f"sqlite:{db}", "ls")).stdout
    rows = {
        row["id"]: row for row in json.loads(ok(_at(cli, f"sqlite:{db}", "ls", "--json")).stdout)
    }
    assert "malformed" in rows["Q1"]["damaged"] and "damaged" not in rows["Q1c"], rows
    damaged = _damage(sessions_db, _root_page(sessions_db, "sessions"))
    failed = _at(cli, f"sqlite:{sessions_db}", "ls")
    assert failed.returncode == 1 and "StoreError" in failed.stderr and "recover" in failed.stderr
    script = cli.script([{"text": "Hi."}])
    for args in (("run", "Hi", "--session", "Q1c"), ("run", "Hi")):
        refused = _at(cli, f"sqlite:{sessions_db}", *args, "--model", script)
        assert refused.returncode == 1 and "damaged" in refused.stderr, refused.stderr
        assert "resume repairs" not in refused.stderr
    assert sessions_db.read_bytes() == damaged


def test_commands_named_in_an_error_carry_the_store_in_use(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    result = cli("show", "nope")
    assert result.returncode == 1
    assert f"`duraloop ls --store jsonl:{cli.store}`" in result.stderr


def test_name_the_store_leaves_commands_that_name_one_or_end_in_a_positional_after_dashes() -> None:
    from duraloop.cli import _stores

    _stores._OPENED[:] = [_stores.parse_store_spec("sqlite:a b.db")]
    try:
        assert (
            _stores.name_the_store("run `duraloop check x` now")
            == "run `duraloop check x --store 'sqlite:a b.db'` now"
        )
        kept = (
            "`duraloop fork --at 3 --store s -- -d` and `duraloop fork --at 3 -- -d` and "
            "`duraloop demo`"
        )
        assert _stores.name_the_store(kept) == kept
    finally:
        _stores._OPENED.clear()
