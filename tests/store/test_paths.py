"""Path encoding of the JSONL layout (docs/store.md#jsonl-layout): the spec's examples, verbatim."""

from __future__ import annotations

from pathlib import Path

import pytest

from duraloop.errors import UsageError
from duraloop.store._jsonl._paths import (
    check_session_id,
    decode_segment,
    encode_segment,
    project_key,
    session_dir,
)


@pytest.mark.parametrize(
    ("cwd", "key"),
    [
        ("/home/user/src/deepseek-harness", "--home-user-src-deepseek-harness--"),
        ("C:\\work\\agent", "--C-work-agent--"),
        ("/", "--root--"),
        ("/开发/~agent", "--~5F00~53D1-~007Eagent--"),
    ],
)
def test_project_key_matches_the_spec_examples(cwd: str, key: str) -> None:
    assert project_key(cwd) == key


@pytest.mark.parametrize(
    ("session_id", "segment"),
    [
        (".", "~002E"),
        ("..", "~002E~002E"),
        ("a/b", "a~002Fb"),
        ("~", "~007E"),
        ("\0", "~0000"),
        ("\ud800", "~D800"),
        ("😀", "~D83D~DE00"),
        ("ok-id_1.2", "ok-id_1.2"),
    ],
)
def test_encode_segment_is_injective_escaping(session_id: str, segment: str) -> None:
    assert encode_segment(session_id) == segment


def test_empty_segment_is_refused() -> None:
    with pytest.raises(ValueError, match="must not be empty"):
        encode_segment("")


@pytest.mark.parametrize(
    ("session_id", "fragment"),
    [
        ("", "the session id is empty"),
        ("x" * 201, "is 201 characters"),
        ("a\0b", "NUL or a line break"),
        ("a\nb", "NUL or a line break"),
        ("é" * 60, "over the 255-character file-name limit"),
    ],
)
def test_session_dir_refuses_an_id_no_file_can_be_named_for(
    tmp_path: Path, session_id: str, fragment: str
) -> None:
    with pytest.raises(UsageError, match=fragment) as caught:
        session_dir(tmp_path, session_id, None)
    assert "1 to 200 characters" in str(caught.value) or "file-name limit" in str(caught.value)


def test_a_200_character_id_is_accepted_and_decode_segment_inverts_encode_segment(
    tmp_path: Path,
) -> None:
    assert session_dir(tmp_path, "x" * 200, None).name == "x" * 200
    for session_id in ["a/b", "..", "😀 é", "ok-id_1.2"]:
        assert decode_segment(encode_segment(session_id)) == session_id


def test_the_cached_id_check_still_refuses_every_time() -> None:
    # check_session_id and the segment encoding are cached per id (every append locates its
    # log by id); a refusal is never cached, so a refused id is refused again.
    for _ in range(2):
        with pytest.raises(UsageError, match="NUL or a line break"):
            check_session_id("bad\nid")
    check_session_id("good-id")
    check_session_id("good-id")
    assert encode_segment("a/b") == encode_segment("a/b") == "a~002Fb"
