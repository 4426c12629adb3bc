"""The output cap: exact slices, boundaries, errors, and the continuation property."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sift.errors import BadRequest, OffsetOutOfRange
from sift.render import Slice, cap


def test_whole_content_fits() -> None:
    assert cap("hello", 0, 100) == Slice("hello", 0, 5, None, 5, False)


def test_empty_content_offset_zero_is_an_empty_final_slice() -> None:
    assert cap("", 0, 16) == Slice("", 0, 0, None, 0, False)


def test_offset_at_end_is_an_empty_final_slice() -> None:
    assert cap("abc", 3, 16) == Slice("", 3, 0, None, 3, False)


def test_cut_prefers_paragraph_boundary_in_last_tenth() -> None:
    text = "a" * 95 + "\n\n" + "b" * 50
    s = cap(text, 0, 100)
    assert s == Slice("a" * 95 + "\n\n", 0, 97, 97, 147, True)


def test_cut_prefers_line_boundary_when_no_paragraph() -> None:
    text = "a" * 93 + "\n" + "b" * 50
    assert cap(text, 0, 100).next_offset == 94


def test_boundary_outside_last_tenth_is_ignored() -> None:
    text = "a" * 50 + "\n\n" + "b" * 100
    s = cap(text, 0, 100)
    assert (s.bytes, s.next_offset, s.content) == (100, 100, "a" * 50 + "\n\n" + "b" * 48)


def test_never_splits_a_utf8_sequence() -> None:
    text = "é" * 10  # 2 bytes each
    s = cap(text, 0, 5)
    assert (s.content, s.bytes, s.next_offset, s.total_bytes) == ("éé", 4, 4, 20)
    s2 = cap(text, 4, 5)
    assert (s2.content, s2.next_offset) == ("éé", 8)


def test_four_byte_characters() -> None:
    text = "😀😀😀"
    assert cap(text, 0, 7) == Slice("😀", 0, 4, 4, 12, True)


def test_offset_past_end_is_an_error() -> None:
    with pytest.raises(OffsetOutOfRange):
        cap("abc", 4, 16)


def test_negative_offset_is_an_error() -> None:
    with pytest.raises(OffsetOutOfRange):
        cap("abc", -1, 16)


def test_offset_inside_a_utf8_sequence_is_an_error() -> None:
    with pytest.raises(OffsetOutOfRange) as info:
        cap("é", 1, 16)
    assert info.value.code == "offset_out_of_range"


def test_tiny_max_bytes_is_a_bad_request() -> None:
    with pytest.raises(BadRequest):
        cap("abc", 0, 3)


def test_big_content_is_sliced_repeatedly() -> None:
    text = ("word " * 20 + "\n\n") * 50_000  # ~5 MB
    offset, pieces = 0, []
    for _ in range(5):
        s = cap(text, offset, 1_000_000)
        pieces.append(s.content)
        assert s.next_offset is not None
        offset = s.next_offset
    assert "".join(pieces) == text[: len("".join(pieces))]
    assert all(p.endswith("\n\n") for p in pieces)


def _read_all(text: str, max_bytes: int) -> tuple[str, int]:
    offset, out, steps = 0, [], 0
    while True:
        s = cap(text, offset, max_bytes)
        assert s.bytes <= max_bytes
        assert len(s.content.encode("utf-8")) == s.bytes
        out.append(s.content)
        steps += 1
        if not s.truncated:
            assert s.next_offset is None
            assert s.offset + s.bytes == s.total_bytes
            return "".join(out), steps
        assert s.next_offset == s.offset + s.bytes
        assert s.next_offset > offset
        offset = s.next_offset


@settings(max_examples=300, deadline=None)
@given(text=st.text(), max_bytes=st.integers(min_value=16, max_value=300))
def test_following_next_offset_yields_the_whole_content(text: str, max_bytes: int) -> None:
    joined, _ = _read_all(text, max_bytes)
    assert joined == text


@settings(max_examples=100, deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from(["a", "é", "中", "😀", "\n", " "]), max_size=2000),
    max_bytes=st.integers(min_value=16, max_value=64),
)
def test_continuation_with_multibyte_and_newlines(text: str, max_bytes: int) -> None:
    joined, _ = _read_all(text, max_bytes)
    assert joined == text
