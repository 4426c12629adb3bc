"""The error tree: stable codes, the envelope shape, and docs/errors.md in step with the code."""

from __future__ import annotations

import re
from pathlib import Path

from sift.errors import Blocked, RobotsDisallowed, SiftError, UpstreamTimeout, all_error_classes


def test_codes_are_unique_snake_case() -> None:
    codes = [cls.code for cls in all_error_classes()]
    assert len(codes) == len(set(codes))
    assert all(re.fullmatch(r"[a-z]+(_[a-z]+)*", c) for c in codes)


def test_envelope_shape_and_default_hint() -> None:
    err = RobotsDisallowed("robots.txt disallows /private")
    assert isinstance(err, Blocked)
    assert err.status == 403
    assert err.to_dict() == {
        "error": {
            "code": "robots_disallowed",
            "message": "robots.txt disallows /private",
            "hint": RobotsDisallowed.default_hint,
        }
    }
    assert UpstreamTimeout("slow", hint="try later").to_dict()["error"]["hint"] == "try later"
    assert UpstreamTimeout.status == 504


def test_every_code_is_documented(repo_root: Path) -> None:
    doc = (repo_root / "docs" / "errors.md").read_text()
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", doc, flags=re.M))
    codes = {cls.code for cls in all_error_classes()}
    assert codes - documented == set()
    # Nothing is documented but unused.
    assert documented - codes == set()


def test_base_is_internal_error() -> None:
    assert SiftError("x").to_dict()["error"]["code"] == "internal_error"
    assert SiftError.status == 500
