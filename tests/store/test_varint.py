"""The `sourceEventSeqs` varint codec of the SQLite store (docs/store.md#sqlite).

Every list has exactly one encoding: the round trip is a property over random lists, and a
non-canonical, truncated or out-of-range encoding is refused (what a hand-written or damaged
row may hold), so a reader never accepts two spellings of one list.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from duraloop.store._codec._varint import VarintError, decode_seqs, encode_seqs

MAX_SAFE = 2**53 - 1
seqs_lists = st.lists(st.integers(min_value=0, max_value=MAX_SAFE), max_size=40)


@given(seqs_lists)
def test_encode_then_decode_round_trips(seqs: list[int]) -> None:
    assert decode_seqs(encode_seqs(seqs)) == seqs


@pytest.mark.parametrize(
    ("seqs", "blob"),
    [
        ([], b""),
        ([0], b"\x00"),
        ([300], b"\xac\x02"),
        ([0, 1, 2], b"\x00\x02\x02"),
        ([5, 3], b"\x05\x03"),
        ([1, 5, 3], b"\x01\x08\x03"),
    ],
)
def test_first_is_leb128_then_zigzag_deltas(seqs: list[int], blob: bytes) -> None:
    assert encode_seqs(seqs) == blob
    assert decode_seqs(blob) == seqs


@given(st.integers(min_value=0, max_value=2**40), st.integers(min_value=1, max_value=3))
def test_non_canonical_varint_is_refused(value: int, extra_zero_groups: int) -> None:
    canonical = encode_seqs([value])
    padded = (
        canonical[:-1] + bytes([canonical[-1] | 0x80]) + b"\x80" * (extra_zero_groups - 1) + b"\x00"
    )
    with pytest.raises(VarintError, match="not canonical|longer than 8 bytes"):
        decode_seqs(padded)


@given(seqs_lists.filter(lambda seqs: any(s >= 0x80 for s in seqs)))
def test_truncated_blob_is_refused(seqs: list[int]) -> None:
    blob = encode_seqs(seqs)
    assert blob[-1] < 0x80
    with pytest.raises(VarintError, match="truncated"):
        decode_seqs(blob + b"\x80")


def test_delta_below_zero_and_unsafe_values_are_refused() -> None:
    with pytest.raises(VarintError, match="non-negative safe integer"):
        decode_seqs(b"\x00\x01")  # 0, then delta -1
    with pytest.raises(VarintError, match="longer than 8 bytes"):
        decode_seqs(b"\xff" * 9 + b"\x01")
    with pytest.raises(VarintError, match="non-negative safe integer"):
        encode_seqs([-1])
    with pytest.raises(VarintError, match="non-negative safe integer"):
        encode_seqs([MAX_SAFE + 1])
