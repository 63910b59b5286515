"""Header records: key order on write, version-before-shape on read.

See docs/store.md#jsonl-records, case 62.
"""

from __future__ import annotations

import pytest

from duraloop.errors import CorruptLogError, SessionFormatUnsupportedError
from duraloop.log import SessionHeader
from duraloop.store._codec._records import decode_header, encode_header

VALID = b'{"type":"session","version":0,"id":"x","createdAt":1,"delegationDepth":0'


def test_header_is_written_in_dsh_key_order() -> None:
    header = SessionHeader(
        id="x",
        created_at=5,
        cwd="/w",
        parent_session="p",
        seed_length=3,
        origin="subagent",
        delegation_depth=1,
        agent_preset="a",
    )
    assert encode_header(header) == (
        b'{"type":"session","version":0,"id":"x","createdAt":5,"cwd":"/w","parentSession":"p",'
        b'"seedLength":3,"origin":"subagent","delegationDepth":1,"agentPreset":"a"}\n'
    )
    assert decode_header(encode_header(header)[:-1], path=None) == header


def test_top_level_header_always_writes_delegation_depth() -> None:
    assert encode_header(SessionHeader(id="x", created_at=5)).endswith(b'"delegationDepth":0}\n')


@pytest.mark.parametrize(
    "fragment",
    [
        b'"createdAt":1.5',
        b'"createdAt":-1',
        b'"createdAt":9007199254740992',
        b'"delegationDepth":"1"',
        b'"delegationDepth":1.5',
        b'"delegationDepth":-1',
        b'"agentPreset":7',
        b'"sandboxMode":"x"',
        b'"approvalPolicy":"x"',
        b'"origin":"other"',
    ],
)
def test_case_62_bad_header_fields_are_corruption(fragment: bytes) -> None:
    key = fragment.split(b":")[0]
    base = VALID.replace(b',"createdAt":1', b"") if key == b'"createdAt"' else VALID
    base = base.replace(b',"delegationDepth":0', b"") if key == b'"delegationDepth"' else base
    with pytest.raises(CorruptLogError, match="invalid session header"):
        decode_header(base + b"," + fragment + b"}", path="p")


def test_case_62_missing_delegation_depth_is_rejected() -> None:
    with pytest.raises(CorruptLogError, match="delegationDepth"):
        decode_header(b'{"type":"session","version":0,"id":"x","createdAt":1}', path="p")


def test_case_62_future_version_is_refused_before_the_shape_check() -> None:
    line = b'{"type":"session","version":42,"id":"x","futureOnly":true}'
    with pytest.raises(SessionFormatUnsupportedError) as info:
        decode_header(line, path="/logs/x/session.jsonl")
    assert str(info.value) == (
        'session "x" uses log format v42, but this harness reads only v0: the log was written '
        "by a newer harness — upgrade the harness to open it (raw log: /logs/x/session.jsonl)"
    )


def test_case_62_non_string_id_is_named_in_the_refusal() -> None:
    with pytest.raises(SessionFormatUnsupportedError, match='session "123" uses log format v42'):
        decode_header(b'{"type":"session","version":42,"id":123}', path="p")


def test_case_68_older_version_is_refused_without_an_upgrade_claim() -> None:
    with pytest.raises(
        SessionFormatUnsupportedError,
        match="older than the supported v0, and this build ships no upgrade path",
    ):
        decode_header(b'{"type":"session","version":-1,"id":"x"}', path="p")


def test_case_62_non_object_header_is_corruption_not_a_refusal() -> None:
    with pytest.raises(CorruptLogError, match="not a JSON object"):
        decode_header(b"42", path="p")
