"""Zstandard framing (docs/store.md#zstd-framing): frame boundaries.

The structural scan decides what is torn (end of file inside a frame) and what is corrupt
(bad magic, reserved bits or block type), so it is checked at every cut point of a real
frame and against hand-made bad headers; decompression checks content checksums.
"""

from __future__ import annotations

import pytest
import zstandard

from duraloop.errors import CorruptLogError
from duraloop.store._jsonl._zstd import (
    FrameCodec,
    decompress_complete,
    decompress_torn,
    scan_frames,
)


def frames(*texts: bytes) -> list[bytes]:
    codec = FrameCodec()
    return [codec.compress(text) for text in texts]


def test_frames_carry_content_size_and_checksum_and_round_trip() -> None:
    first, second = frames(b"header\n", b"a\nb\n" * 50)
    params = zstandard.get_frame_parameters(first)
    assert params.has_checksum
    assert params.content_size == len(b"header\n")
    scan = scan_frames(first + second, path="p")
    assert scan.frames == [(0, len(first)), (len(first), len(first) + len(second))]
    assert scan.torn_start is None
    assert decompress_complete(first + second, path="p", offset=0) == b"header\n" + b"a\nb\n" * 50


def test_every_cut_inside_the_last_frame_makes_it_torn() -> None:
    first, second = frames(b"header\n", b"".join(b'{"n":%d}\n' % k for k in range(200)))
    data = first + second
    for cut in range(len(first) + 1, len(data)):
        scan = scan_frames(data[:cut], path="p")
        assert scan.frames == [(0, len(first))], cut
        assert scan.torn_start == len(first), cut


def test_torn_frame_yields_a_prefix_of_its_plaintext_or_nothing() -> None:
    (frame,) = frames(b"".join(b'{"n":%d}\n' % k for k in range(2000)))
    text = decompress_torn(frame[: len(frame) // 2])
    assert b"".join(b'{"n":%d}\n' % k for k in range(2000)).startswith(text)
    assert decompress_torn(b"\x28\xb5") == b""


@pytest.mark.parametrize(
    ("data", "detail"),
    [
        (b"\x00\x01\x02\x03\x04\x05\x06", "bad magic number"),
        (b"\x28\xb5\x2f\xfd\x18\x00\x00\x00", "reserved frame-header bits"),
        (b"\x28\xb5\x2f\xfd\x20\x00\x07\x00\x00", "reserved block type"),
        (b"\x29", "bad magic number"),
    ],
)
def test_invalid_frame_structure_is_corruption(data: bytes, detail: str) -> None:
    with pytest.raises(CorruptLogError, match=detail):
        scan_frames(data, path="p")


def test_invalid_structure_after_a_complete_frame_is_corruption() -> None:
    (first,) = frames(b"header\n")
    with pytest.raises(CorruptLogError, match=f"invalid zstd frame at byte {len(first)}"):
        scan_frames(first + b"garbage!", path="p")


def test_checksum_mismatch_is_corruption() -> None:
    first, second = frames(b"header\n", b"x\n" * 100)
    damaged = bytearray(second)
    damaged[-1] ^= 0xFF
    with pytest.raises(CorruptLogError, match="does not decode"):
        decompress_complete(first + bytes(damaged), path="p", offset=0)


def test_listing_scan_stops_after_the_first_frame() -> None:
    first, second = frames(b"header\n", b"x\n")
    scan = scan_frames(first + second[:3], path="p", max_frames=1)
    assert scan == type(scan)([(0, len(first))], None)
