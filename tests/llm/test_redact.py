"""Secrets never leak through provider errors (issue 9, D15): one redactor at the adapters.

A provider or proxy that echoes the request's credentials in its error body, and a base URL
that carries a password (`http://user:pw@host`), put secrets into `LlmError` messages, and
from there into the log (`assistant/chunk` failures, `llm/retry`, `turn/end`), the
exception a caller gets and what the CLI prints. Each adapter (OpenAI, DeepSeek,
Anthropic) is driven against its wire-level server with the echo fault
(`queue_echo_credentials`, `Reply(echo_credentials=True)`), on a real JSONL store, and the
secret is looked for everywhere: the log files' bytes, the exception's text and its whole
chain as a traceback prints it, and (one CLI run) stdout and stderr.
"""

from __future__ import annotations

import base64
import traceback
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli._support import Cli, clean_env
from duraloop.errors import LlmError
from duraloop.llm import AnthropicMessagesModel, DeepSeekChatModel, OpenAIChatModel, RetryPolicy
from duraloop.llm._chat_completions import ChatCompletionsModel
from duraloop.llm._redact import REDACTED, SecretRedactor, url_secrets
from duraloop.loop import LoopConfig, SessionSetup, start_session
from duraloop.store import JsonlStore

from ._wire_anthropic import AnthropicWireServer, Reply
from ._wire_chat import WireChatServer

KEY = "sk-live-0123456789abcdef"
PASSWORD = "s3cr3t-pw"
USERINFO = f"alice:{PASSWORD}"
BASIC = base64.b64encode(USERINFO.encode()).decode()
SECRETS = (KEY, PASSWORD, BASIC)
ONE_RETRY = RetryPolicy(max_retries=1, initial_delay_ms=1, max_delay_ms=1, jitter_ratio=0.0)


def _with_credentials(url: str) -> str:
    return url.replace("http://", f"http://{USERINFO}@", 1)


def _store_bytes(root: Path) -> bytes:
    return b"".join(path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file())


def _assert_nowhere(exc: BaseException, store: Path) -> None:
    """No secret in the exception, its printed chain, or any byte of the store."""
    printed = "".join(traceback.format_exception(exc))
    stored = _store_bytes(store)
    for secret in SECRETS:
        assert secret not in str(exc)
        assert secret not in printed
        assert secret.encode() not in stored
    assert REDACTED in str(exc)


@pytest.fixture
def chat_server() -> Iterator[WireChatServer]:
    wire = WireChatServer("openai")
    wire.start()
    try:
        yield wire
    finally:
        wire.stop()


def _chat_model(dialect: str, base_url: str) -> ChatCompletionsModel:
    if dialect == "openai":
        return OpenAIChatModel("gpt-test", api_key=KEY, base_url=base_url)
    return DeepSeekChatModel("deepseek-chat", api_key=KEY, base_url=base_url)


async def _failed_turn(tmp_path: Path, model: object, store: Path) -> LlmError:
    loop = start_session(
        SessionSetup(
            store=JsonlStore(store),
            model=model,  # type: ignore[arg-type]
            cwd=tmp_path,
            config=LoopConfig(retry=ONE_RETRY),
        )
    )
    with loop, pytest.raises(LlmError) as caught:
        await loop.run_turn("hi")
    return caught.value


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("dialect", "status"), [("openai", 401), ("openai", 500), ("deepseek", 401)]
)
async def test_chat_completions_error_echoing_the_bearer_key_leaks_it_nowhere(
    tmp_path: Path, dialect: str, status: int
) -> None:
    server = WireChatServer(dialect)  # type: ignore[arg-type]
    server.start()
    try:
        server.queue_echo_credentials(status)
        server.queue_echo_credentials(status)  # a 500 is retried once
        model = _chat_model(dialect, server.base_url)
        exc = await _failed_turn(tmp_path, model, tmp_path / "store")
    finally:
        server.stop()
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"  # it was echoed
    assert exc.message.endswith(f"Authorization: Bearer {REDACTED}")
    _assert_nowhere(exc, tmp_path / "store")
    if status == 500:
        assert b'"type":"llm/retry"' in _store_bytes(tmp_path / "store")


@pytest.mark.anyio
async def test_anthropic_401_echoing_the_key_header_leaks_it_nowhere(tmp_path: Path) -> None:
    with AnthropicWireServer.running() as server:
        server.queue(Reply(401, echo_credentials=True))
        model = AnthropicMessagesModel("claude-test", api_key=KEY, base_url=server.base_url)
        exc = await _failed_turn(tmp_path, model, tmp_path / "store")
    sent = server.requests[0].headers
    assert KEY in (sent.get("x-api-key"), sent.get("authorization", "").removeprefix("Bearer "))
    assert exc.code == "AUTH" and "invalid credentials (" in exc.message
    _assert_nowhere(exc, tmp_path / "store")


@pytest.mark.anyio
@pytest.mark.parametrize("dialect", ["openai", "deepseek"])
async def test_chat_completions_base_url_password_leaks_nowhere(
    tmp_path: Path, chat_server: WireChatServer, dialect: str
) -> None:
    chat_server.queue_echo_credentials(401)  # echoes the Basic token the client sent
    model = _chat_model(dialect, _with_credentials(chat_server.base_url))
    exc = await _failed_turn(tmp_path, model, tmp_path / "echo")
    _assert_nowhere(exc, tmp_path / "echo")
    # A transport failure names the URL: its credentials are redacted, the host is kept.
    refused = _chat_model(dialect, f"http://{USERINFO}@127.0.0.1:1/v1")
    exc = await _failed_turn(tmp_path, refused, tmp_path / "refused")
    assert exc.code == "TRANSPORT" and f"http://{REDACTED}@127.0.0.1:1/v1" in exc.message
    _assert_nowhere(exc, tmp_path / "refused")


@pytest.mark.anyio
async def test_anthropic_base_url_password_leaks_nowhere(tmp_path: Path) -> None:
    with AnthropicWireServer.running() as server:
        server.queue(Reply(401, echo_credentials=True))
        model = AnthropicMessagesModel(
            "claude-test", api_key=KEY, base_url=_with_credentials(server.base_url)
        )
        exc = await _failed_turn(tmp_path, model, tmp_path / "echo")
    _assert_nowhere(exc, tmp_path / "echo")
    refused = AnthropicMessagesModel(
        "claude-test", api_key=KEY, base_url=f"http://{USERINFO}@127.0.0.1:1"
    )
    exc = await _failed_turn(tmp_path, refused, tmp_path / "refused")
    assert exc.code == "TRANSPORT" and f"http://{REDACTED}@127.0.0.1:1" in exc.message
    _assert_nowhere(exc, tmp_path / "refused")


def test_cli_run_with_a_password_in_base_url_prints_and_logs_no_secret(
    tmp_path: Path, chat_server: WireChatServer
) -> None:
    chat_server.queue_echo_credentials(401)
    cli = Cli(tmp_path)
    result = cli(
        "run",
        "hi",
        "--model",
        "openai:gpt-test",
        "--base-url",
        _with_credentials(chat_server.base_url),
        env=clean_env(tmp_path, OPENAI_API_KEY=KEY),
    )
    assert result.returncode != 0
    assert chat_server.requests, "the CLI reached the server"
    stored = _store_bytes(cli.store)
    assert stored  # the session was logged
    for secret in (*SECRETS, USERINFO):
        assert secret not in result.stdout
        assert secret not in result.stderr
        assert secret.encode() not in stored
    assert REDACTED in result.stdout + result.stderr


def test_url_secrets_are_the_userinfo_password_and_basic_token_raw_and_decoded() -> None:
    found = url_secrets("https://bob:p%40ss@proxy.example/v1")
    assert found == [
        "bob:p%40ss",
        "p%40ss",
        base64.b64encode(b"bob:p%40ss").decode(),
        "bob:p@ss",
        "p@ss",
        base64.b64encode(b"bob:p@ss").decode(),
    ]
    assert url_secrets("https://proxy.example/v1") == []


def test_redactor_replaces_every_secret_the_longer_first_and_leaves_short_keys() -> None:
    redactor = SecretRedactor(["sk-abcd", "k"], base_url="http://u:pw@h/v1")
    assert redactor.text("key sk-abcd at http://u:pw@h/v1") == (
        f"key {REDACTED} at http://{REDACTED}@h/v1"
    )
    assert redactor.text("a key k") == "a key k"  # under 4 characters: not searched for
    assert SecretRedactor([]).text("nothing sk-abcd") == "nothing sk-abcd"


def test_redactor_scrubs_an_exception_chain_in_place() -> None:
    redactor = SecretRedactor([KEY])
    try:
        try:
            raise ValueError(f"body echoed {KEY}")
        except ValueError as inner:
            raise LlmError(f"HTTP 401: {KEY}", code="AUTH", request_id=KEY) from inner
    except LlmError as exc:
        redactor.scrub(exc)
        printed = "".join(traceback.format_exception(exc))
        assert KEY not in printed and exc.message == f"HTTP 401: {REDACTED}"
        assert exc.request_id == REDACTED and exc.failure()["message"] == exc.message
