"""Submission validation: the Idempotency-Key, the body shape, per-target options."""

from __future__ import annotations

import json

import pytest

from sift.batch.submit import check_idem_key, parse_submission
from sift.config import ClassesSettings
from sift.errors import BadRequest, RequestTooLarge
from sift.principal import Principal

FLEET = Principal("indexer", "fleet")
LIMITS = ClassesSettings().fleet


@pytest.mark.parametrize("key", ["k", "a b", "~" * 255, "550e8400-e29b-41d4-a716-446655440000"])
def test_good_idempotency_keys(key: str) -> None:
    assert check_idem_key(key) == key
    assert check_idem_key(f"  {key} ") == key


@pytest.mark.parametrize("key", [None, "", "   ", "x" * 256, "tab\there", "é", "nul\x00"])
def test_bad_idempotency_keys(key: str | None) -> None:
    with pytest.raises(BadRequest, match="Idempotency-Key"):
        check_idem_key(key)


def test_defaults_merge_under_per_target_options() -> None:
    body = {
        "targets": [
            " http://a.test/1 ",
            {"url": "http://a.test/2", "options": {"format": "text", "max_bytes": 10}},
            {"url": "http://a.test/3"},
        ],
        "options": {"format": "html", "links": True},
    }
    got = parse_submission(body, FLEET, LIMITS)
    assert [t.url for t in got] == ["http://a.test/1", "http://a.test/2", "http://a.test/3"]
    assert [json.loads(t.options) for t in got] == [
        {"format": "html", "links": True},
        {"format": "text", "links": True, "max_bytes": 10},
        {"format": "html", "links": True},
    ]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([], "request body must be a JSON object"),
        ({"targets": []}, "targets: expected a non-empty list"),
        ({"targets": ["http://a.test/"], "extra": 1}, "unknown field extra"),
        ({"targets": ["http://a.test/"], "options": {"url": "x"}}, "url is set per target"),
        ({"targets": ["http://a.test/"], "options": {"format": 1}}, "default invalid options"),
        ({"targets": [{"url": "http://a.test/", "x": 1}]}, "[0] unknown field x"),
        ({"targets": [{"url": "http://a.test/", "options": []}]}, "[0] options: expected"),
        ({"targets": [{"options": {}}]}, "[0] invalid options: url: required"),
    ],
)
def test_bad_bodies(body: object, message: str) -> None:
    with pytest.raises(BadRequest) as info:
        parse_submission(body, FLEET, LIMITS)
    assert message in info.value.message


def test_too_many_targets_is_413_before_any_validation() -> None:
    limits = ClassesSettings().restricted
    with pytest.raises(RequestTooLarge, match="501 targets exceed"):
        parse_submission({"targets": [1] * 501}, Principal("a", "restricted"), limits)
