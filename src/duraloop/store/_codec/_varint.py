"""The varint encoding of `sourceEventSeqs` in a SQLite store (docs/store.md#sqlite).

A list of seqs is one BLOB: the first seq as an unsigned LEB128 varint, then each next seq as
the ZigZag-encoded signed delta from the one before it, again as an unsigned LEB128 varint.
An empty list is an empty BLOB (an absent list is SQL NULL, never a BLOB). Decoding accepts
only canonical varints (no redundant trailing zero group), so every list has exactly one
encoding, and only non-negative safe-integer seqs.
"""

from __future__ import annotations

from collections.abc import Sequence

_MAX_SAFE = 2**53 - 1
_MAX_VARINT_BYTES = 8
"""Enough for any ZigZag delta between two safe integers (< 2**55 needs 8 groups of 7 bits)."""


class VarintError(ValueError):
    """Raised when a seqs BLOB is truncated, non-canonical, or holds an unsafe seq."""


def _put(value: int, out: bytearray) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _zigzag(delta: int) -> int:
    return delta * 2 if delta >= 0 else -delta * 2 - 1


def _unzigzag(value: int) -> int:
    return value >> 1 if value & 1 == 0 else -((value + 1) >> 1)


def encode_seqs(seqs: Sequence[int]) -> bytes:
    """Encode seqs: first as unsigned LEB128, then ZigZag deltas.

    Args:
        seqs: non-negative safe integers, in any order.

    Returns:
        The BLOB; empty for an empty list.

    Raises:
        VarintError: if a seq is not a non-negative safe integer.
    """
    out = bytearray()
    previous = 0
    for index, seq in enumerate(seqs):
        if type(seq) is not int or not 0 <= seq <= _MAX_SAFE:
            raise VarintError(f"seq {seq!r} at index {index} is not a non-negative safe integer")
        _put(seq if index == 0 else _zigzag(seq - previous), out)
        previous = seq
    return bytes(out)


def _take(blob: bytes, start: int) -> tuple[int, int]:
    """Return the varint at `start` and the offset after it."""
    value = 0
    shift = 0
    position = start
    while True:
        if position >= len(blob):
            raise VarintError(f"varint at byte {start} is truncated")
        if position - start >= _MAX_VARINT_BYTES:
            raise VarintError(f"varint at byte {start} is longer than {_MAX_VARINT_BYTES} bytes")
        byte = blob[position]
        position += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            if byte == 0 and position - start > 1:
                raise VarintError(f"varint at byte {start} is not canonical (trailing zero group)")
            return value, position


def decode_seqs(blob: bytes) -> list[int]:
    """Decode a seqs BLOB written by `encode_seqs` (or by dsh).

    Args:
        blob: the stored bytes.

    Returns:
        The seqs, in stored order.

    Raises:
        VarintError: if a varint is truncated, longer than 8 bytes or not canonical, or a
            decoded seq is not a non-negative safe integer.
    """
    seqs: list[int] = []
    position = 0
    while position < len(blob):
        start = position
        value, position = _take(blob, position)
        seq = value if not seqs else seqs[-1] + _unzigzag(value)
        if not 0 <= seq <= _MAX_SAFE:
            raise VarintError(
                f"the seq decoded at byte {start} ({seq}) is not a non-negative safe integer"
            )
        seqs.append(seq)
    return seqs
