"""The bounded unified diff (``sift.changes.diff``): exact text, counts and cuts."""

from __future__ import annotations

import difflib

from sift.changes.diff import trim, unified


def lines(*items: str) -> str:
    return "".join(f"{i}\n" for i in items)


def reference(old: str, new: str) -> str:
    """Python's own unified diff of the whole texts, as ``unified`` writes it."""
    diff = difflib.unified_diff(
        old.splitlines(), new.splitlines(), "previous", "current", lineterm=""
    )
    return "".join(f"{line}\n" for line in diff)


def test_one_changed_line_in_a_long_text_matches_difflib_whole() -> None:
    old = lines(*(f"line {i}" for i in range(1000)))
    new = old.replace("line 500\n", "line five hundred\n")
    got = unified(old, new, max_lines=100, max_bytes=1 << 20)
    assert got.text == (
        "--- previous\n+++ current\n@@ -498,7 +498,7 @@\n line 497\n line 498\n line 499\n"
        "-line 500\n+line five hundred\n line 501\n line 502\n line 503\n"
    )
    assert got.text == reference(old, new)
    assert (got.added, got.removed, got.truncated) == (1, 1, False)
    # Only the changed middle was compared: max_lines=100 was not reached.
    t = trim(old, new)
    assert (t.skip, t.lines) == (497, 7)


def test_changes_at_both_ends_and_insertions() -> None:
    old = lines("a", "b", "c", "d", "e", "f", "g", "h", "i", "j")
    new = lines("A", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k")
    got = unified(old, new, max_lines=100, max_bytes=1 << 20)
    assert got.text == reference(old, new)
    assert got.text == (
        "--- previous\n+++ current\n@@ -1,4 +1,4 @@\n-a\n+A\n b\n c\n d\n"
        "@@ -8,3 +8,4 @@\n h\n i\n j\n+k\n"
    )
    assert (got.added, got.removed) == (2, 1)


def test_equal_texts_have_an_empty_diff() -> None:
    got = unified(lines("x", "y"), lines("x", "y"), max_lines=10, max_bytes=100)
    assert (got.text, got.added, got.removed, got.truncated) == ("", 0, 0, False)


def test_lines_past_max_lines_are_not_compared_and_say_truncated() -> None:
    old = lines(*(f"old {i}" for i in range(50)))
    new = lines(*(f"new {i}" for i in range(50)))
    got = unified(old, new, max_lines=3, max_bytes=1 << 20)
    assert got.text == (
        "--- previous\n+++ current\n@@ -1,3 +1,3 @@\n"
        "-old 0\n-old 1\n-old 2\n+new 0\n+new 1\n+new 2\n"
    )
    assert (got.added, got.removed, got.truncated) == (3, 3, True)


def test_a_long_diff_is_cut_at_a_line_with_whole_counts() -> None:
    old = lines(*(f"old {i}" for i in range(50)))
    new = lines(*(f"new {i}" for i in range(50)))
    header = "--- previous\n+++ current\n@@ -1,50 +1,50 @@\n"
    got = unified(old, new, max_lines=1000, max_bytes=len(header) + 20)
    assert got.text == header + "-old 0\n-old 1\n"  # 7 bytes a line: two fit, not a third
    assert (got.added, got.removed, got.truncated) == (50, 50, True)
