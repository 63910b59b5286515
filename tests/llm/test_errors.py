"""Error classification (docs/providers.md#errors, #error-codes): the same status and wording give
the same code.

Table-driven: each row is a catalog entry whose code decides retryability downstream.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from duraloop.errors import LlmError
from duraloop.llm import (
    code_for_status,
    failure_from_exception,
    is_context_window_exceeded,
    is_quota_exceeded,
    parse_retry_after_ms,
)
from duraloop.llm._errors import LLM_ERROR_CODES


@pytest.mark.parametrize(
    ("status", "detail", "code"),
    [
        (429, "Rate limit reached", "RATE_LIMIT"),
        (500, "", "SERVER"),
        (503, "overloaded", "SERVER"),
        (401, "", "AUTH"),
        (403, "insufficient quota", "AUTH"),
        (400, "bad field", "INVALID_REQUEST"),
        (413, "context_length_exceeded", "INVALID_REQUEST"),
        (400, "This model's maximum context length is 8192 tokens", "CONTEXT_WINDOW_EXCEEDED"),
        (400, "context_length_exceeded invalid_request_error", "CONTEXT_WINDOW_EXCEEDED"),
        (
            400,
            "invalid_request_error input length and `max_tokens` exceed context limit: 198000 + "
            "8192 > 200000",
            "CONTEXT_WINDOW_EXCEEDED",
        ),
        (402, "Insufficient Balance", "QUOTA"),
        (429, "You exceeded your current quota", "QUOTA"),
        (402, "", "HTTP_402"),
        (404, "", "HTTP_404"),
        (422, "", "HTTP_422"),
    ],
)
def test_code_for_status_follows_the_catalog(status: int, detail: str, code: str) -> None:
    assert code_for_status(status, detail) == code


def test_classifiers_do_not_match_generic_text() -> None:
    assert not is_context_window_exceeded("invalid request: messages[0].role")
    assert not is_quota_exceeded("rate limit reached")
    assert is_context_window_exceeded("prompt is too long for the model")
    # Anthropic's wordings live in the shared classifiers, not in the adapter.
    assert is_context_window_exceeded("prompt is too long: 208000 tokens > 200000 maximum")
    assert is_quota_exceeded("Your credit balance is too low to access the Anthropic API.")


def test_parse_retry_after_accepts_seconds_and_http_dates_only_when_positive() -> None:
    assert parse_retry_after_ms("7") == 7000
    assert parse_retry_after_ms("0") is None
    assert parse_retry_after_ms("soon") is None
    assert parse_retry_after_ms("\u00b2") is None  # a latin-1 header byte str.isdigit accepts
    assert parse_retry_after_ms(None) is None
    now = 1_700_000_000.0
    assert parse_retry_after_ms("Tue, 14 Nov 2023 22:13:30 GMT", now_seconds=now) == 10_000
    assert parse_retry_after_ms("Tue, 14 Nov 2023 22:13:10 GMT", now_seconds=now) is None


def test_failure_from_exception_keeps_llm_error_facts_and_marks_others_unknown() -> None:
    error = LlmError("down", code="SERVER", status=502, request_id="req_1")
    assert failure_from_exception(error) == {
        "message": "down",
        "code": "SERVER",
        "status": 502,
        "requestId": "req_1",
    }
    assert failure_from_exception(ValueError("bad")) == {"message": "bad", "code": "UNKNOWN"}
    assert failure_from_exception(KeyError()) == {
        "message": "LLM adapter failed (KeyError)",
        "code": "UNKNOWN",
    }


def test_readme_error_codes_table_lists_every_llm_error_code_and_no_other() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    table = readme.split("**Error codes**", 1)[1].split("\n\n", 2)[1]
    first_cells = [row.split("|")[1] for row in table.splitlines()[2:]]
    listed = {code for cell in first_cells for code in re.findall(r"`([^`]+)`", cell)}
    assert listed == set(LLM_ERROR_CODES) | {"HTTP_<status>"}
