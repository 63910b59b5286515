"""Idempotency keys: one derivation, stable, per session, inherited by a fork's seed.

See docs/recovery.md#idempotency-keys.
"""

from __future__ import annotations

import hashlib
import re

from duraloop.log import SessionHeader, call_origin, idempotency_key


def test_key_is_the_documented_digest_of_session_and_call() -> None:
    digest = hashlib.sha256(b"s1\0call_1").hexdigest()[:32]
    assert idempotency_key("s1", "call_1") == "dl1-" + digest
    assert re.fullmatch(r"dl1-[0-9a-f]{32}", idempotency_key("s1", "call_1"))


def test_key_is_stable_across_calls_and_differs_across_sessions_and_calls() -> None:
    assert idempotency_key("s1", "c") == idempotency_key("s1", "c")
    assert idempotency_key("s1", "c") != idempotency_key("s2", "c")
    assert idempotency_key("s1", "c") != idempotency_key("s1", "d")
    # the separator keeps ("ab", "c") and ("a", "bc") apart
    assert idempotency_key("ab", "c") != idempotency_key("a", "bc")


def test_call_origin_is_the_parent_only_for_calls_in_the_fork_seed() -> None:
    child = SessionHeader(id="child", created_at=1, parent_session="parent", seed_length=10)
    assert call_origin(child, 9) == "parent"  # inherited: its tool/call lies in the seed
    assert call_origin(child, 10) == "child"  # the fork's own call
    assert call_origin(child, None) == "child"  # a call being recorded now
    plain = SessionHeader(id="solo", created_at=1)
    assert call_origin(plain, 0) == "solo"
