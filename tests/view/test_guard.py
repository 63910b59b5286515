"""The token, same-origin and Host checks (docs/view.md#security): 403 unless all hold."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from duraloop.store import JsonlStore
from duraloop.view import CSP, create_app

from ._support import TOKEN, auth, serve, story_session


@pytest.fixture
def client(tmp_path: Path, workspace: Path) -> Iterator[httpx2.Client]:
    store = JsonlStore(tmp_path / "sessions")
    story_session(store, workspace)
    with serve(create_app(store, token=TOKEN)) as served:
        yield served


def _origin(client: httpx2.Client) -> str:
    return str(client.base_url).rstrip("/")


def test_an_api_request_without_the_token_or_with_a_wrong_one_is_403(
    client: httpx2.Client,
) -> None:
    for headers in ({}, {"X-Duraloop-Token": "wrong"}, {"X-Duraloop-Token": ""}):
        answer = client.get("/api/sessions", headers=headers)
        assert answer.status_code == 403, headers
        assert "token" in answer.json()["error"]
        assert answer.headers["content-security-policy"] == CSP
    assert client.get("/api/sessions?token=wrong").status_code == 403


def test_a_get_may_carry_the_token_in_the_query_for_event_source(client: httpx2.Client) -> None:
    assert client.get(f"/api/sessions?token={TOKEN}").status_code == 200
    assert client.get("/api/sessions", headers=auth()).status_code == 200


def test_a_post_needs_the_header_token_and_its_own_origin(client: httpx2.Client) -> None:
    path = "/api/sessions/story/approvals/x"
    body = {"allow": True, "feedback": None}
    origin = _origin(client)
    query_token = client.post(f"{path}?token={TOKEN}", json=body, headers={"Origin": origin})
    no_origin = client.post(path, json=body, headers=auth())
    other_origin = client.post(path, json=body, headers={**auth(), "Origin": "http://evil.test"})
    assert [query_token.status_code, no_origin.status_code, other_origin.status_code] == [403] * 3
    assert "same-origin" in other_origin.json()["error"]
    allowed = client.post(path, json=body, headers={**auth(), "Origin": origin})
    assert allowed.status_code == 405  # past the guard: this server was given no decider


def test_a_request_whose_host_is_not_this_server_is_403(client: httpx2.Client) -> None:
    port = client.base_url.port
    assert port is not None
    rebound = client.get("/api/sessions", headers={**auth(), "Host": f"evil.test:{port}"})
    wrong_port = client.get("/", headers={"Host": f"127.0.0.1:{port + 1}"})
    assert rebound.status_code == 403 and "Host" in rebound.json()["error"]
    assert wrong_port.status_code == 403
    assert client.get("/", headers={"Host": f"localhost:{port}"}).status_code == 200


def test_pages_need_no_token_and_hold_no_data(client: httpx2.Client) -> None:
    index = client.get("/")
    assert index.status_code == 200 and index.headers["content-security-policy"] == CSP
    assert index.headers["referrer-policy"] == "no-referrer"
    assert TOKEN not in index.text
