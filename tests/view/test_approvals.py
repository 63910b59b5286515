"""`POST /api/sessions/{id}/approvals/{call_id}`: a decision recorded as `approve`/`deny` do."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx2

from cli._support import clean_env
from duraloop.cli._view_command import view_decider
from duraloop.log import pending_approval
from duraloop.store import JsonlStore
from duraloop.view import create_app

from ._support import TOKEN, auth, paused_session, serve


def _post(client: httpx2.Client, path: str, body: object) -> httpx2.Response:
    origin = str(client.base_url).rstrip("/")
    return client.post(path, json=body, headers={**auth(), "Origin": origin})


def _pending(tmp_path: Path, root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "duraloop", "pending", "--store", str(root)],
        capture_output=True,
        text=True,
        env=clean_env(tmp_path),
        timeout=60,
        check=False,
    )


def test_approve_and_deny_from_the_api_record_the_decisions_as_the_cli_does(
    tmp_path: Path, workspace: Path
) -> None:
    root = tmp_path / "sessions"
    store = JsonlStore(root)
    paused_session(store, workspace, "one")
    paused_session(store, workspace, "two")
    assert "write-1" in _pending(tmp_path, root).stdout
    app = create_app(store, token=TOKEN, decide=view_decider(store, None))
    with serve(app) as client:
        before = client.get("/api/sessions/one", headers=auth()).json()
        approved = _post(client, "/api/sessions/one/approvals/write-1", {"allow": True})
        denied = _post(
            client,
            "/api/sessions/two/approvals/write-1",
            {"allow": False, "feedback": "not <b>now</b>"},
        )
        after = client.get("/api/sessions/one", headers=auth()).json()
        again = _post(client, "/api/sessions/one/approvals/write-1", {"allow": True})
    assert [call["call_id"] for call in before["pending"]] == ["write-1"]
    assert approved.status_code == 200 and approved.json() == {"ok": True, "continuation": "resume"}
    assert denied.status_code == 200
    assert after["pending"] == [] and after["state"] == "paused"  # decided, not carried out
    assert again.status_code == 409 and "already decided" in again.json()["error"]
    one, two = pending_approval(store.read("one")[1]), pending_approval(store.read("two")[1])
    assert one is not None and (one.outcome, one.feedback) == ("allowed-once", None)
    assert two is not None and (two.outcome, two.feedback) == ("rejected", "not <b>now</b>")
    listing = _pending(tmp_path, root)
    assert listing.returncode == 0
    assert "waits for approval" not in listing.stdout  # nothing waits for a person now
    assert listing.stdout.count("is decided") == 2  # each waits to be carried out (resume)


def _tail(store: JsonlStore, session_id: str, start: int) -> list[tuple[str, object]]:
    """The events appended after `start`, without their ask ids."""
    return [
        (event.type, {k: v for k, v in event.data.items() if k != "id"})
        for event in store.read(session_id)[1][start:]
        if isinstance(event.data, dict)
    ]


def test_the_api_appends_what_duraloop_deny_appends(tmp_path: Path, workspace: Path) -> None:
    root = tmp_path / "sessions"
    store = JsonlStore(root)
    paused_session(store, workspace, "by-api")
    paused_session(store, workspace, "by-cli")
    start = len(store.read("by-api")[1])
    app = create_app(store, token=TOKEN, decide=view_decider(store, None))
    with serve(app) as client:
        body = {"allow": False, "feedback": "use the other file"}
        assert _post(client, "/api/sessions/by-api/approvals/write-1", body).status_code == 200
    cli = subprocess.run(
        [sys.executable, "-m", "duraloop", "deny", "by-cli", "write-1"]
        + ["--reason", "use the other file", "--store", str(root)],
        capture_output=True,
        text=True,
        env=clean_env(tmp_path),
        timeout=60,
        check=False,
    )
    assert cli.returncode == 0, cli.stderr
    assert _tail(store, "by-api", start) == _tail(store, "by-cli", start)
    assert [kind for kind, _ in _tail(store, "by-api", start)] == [
        "session/end-seed",
        "approval/decided",
    ]


def test_a_decision_that_cannot_be_made_is_refused_and_nothing_is_written(
    tmp_path: Path, workspace: Path
) -> None:
    store = JsonlStore(tmp_path / "sessions")
    paused_session(store, workspace, "one")
    events = len(store.read("one")[1])
    app = create_app(store, token=TOKEN, decide=view_decider(store, None))
    path = "/api/sessions/one/approvals/write-1"
    with serve(app) as client:
        wrong_call = _post(client, "/api/sessions/one/approvals/other", {"allow": True})
        unknown = _post(client, "/api/sessions/nope/approvals/write-1", {"allow": True})
        not_bool = _post(client, path, {"allow": "yes"})
        too_long = _post(client, path, {"allow": False, "feedback": "x" * 4001})
        not_json = client.post(
            path, content=b"{", headers={**auth(), "Origin": str(client.base_url).rstrip("/")}
        )
    assert wrong_call.status_code == 409 and '"write-1" does' in wrong_call.json()["error"]
    assert unknown.status_code == 404
    assert [not_bool.status_code, too_long.status_code, not_json.status_code] == [400] * 3
    assert "4,000" in too_long.json()["error"]
    assert len(store.read("one")[1]) == events
