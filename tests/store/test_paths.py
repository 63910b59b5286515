"""Path encoding of the JSONL layout (session-spec 6.3): the spec's examples, verbatim."""

from __future__ import annotations

import pytest

from duraloop.store._paths import encode_segment, project_key


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
    [(".", "~002E"), ("..", "~002E~002E"), ("a/b", "a~002Fb"), ("~", "~007E"), ("\0", "~0000"), ("\ud800", "~D800"), ("😀", "~D83D~DE00"), ("ok-id_1.2", "ok-id_1.2")],
)
def test_encode_segment_is_injective_escaping(session_id: str, segment: str) -> None:
    assert encode_segment(session_id) == segment


def test_empty_segment_is_refused() -> None:
    with pytest.raises(ValueError, match="must not be empty"):
        encode_segment("")
