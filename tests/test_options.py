"""Request option parsing and class clamps: every problem reported, nothing out of range kept."""

from __future__ import annotations

import pytest

from sift.config import Settings
from sift.errors import BadRequest
from sift.options import Effective, FetchOptions, apply_class, parse_options

CLASSES = Settings().classes


def test_defaults() -> None:
    assert parse_options({"url": "https://pub.test/a"}) == FetchOptions(url="https://pub.test/a")


def test_all_options_from_json() -> None:
    opts = parse_options(
        {
            "url": " https://pub.test/a ",
            "format": "text",
            "main_content": False,
            "selector": "article",
            "exclude": [".ad", "nav"],
            "links": True,
            "max_bytes": 1000,
            "offset": 5,
            "digest": "sha256:" + "a" * 64,
            "max_age_s": 0,
            "timeout_s": 2,
            "robots": False,
        }
    )
    assert opts == FetchOptions(
        url="https://pub.test/a",
        format="text",
        main_content=False,
        selector="article",
        exclude=(".ad", "nav"),
        links=True,
        max_bytes=1000,
        offset=5,
        digest="sha256:" + "a" * 64,
        max_age_s=0,
        timeout_s=2.0,
        robots=False,
    )


def test_query_strings_are_coerced() -> None:
    opts = parse_options(
        {
            "url": "http://pub.test/",
            "max_bytes": "64",
            "links": "true",
            "timeout_s": "1.5",
            "exclude": "nav",
        },
        from_query=True,
    )
    assert (opts.max_bytes, opts.links, opts.timeout_s, opts.exclude) == (64, True, 1.5, ("nav",))


def test_every_problem_is_listed_at_once() -> None:
    with pytest.raises(BadRequest) as info:
        parse_options(
            {
                "url": 3,
                "format": "pdf",
                "max_bytes": 0,
                "offset": -1,
                "bogus": 1,
                "links": "yes",
                "digest": "md5:x",
                "timeout_s": True,
            }
        )
    assert info.value.message == (
        "invalid options: unknown option bogus (known: url, format, main_content, selector, "
        "exclude, links, max_bytes, offset, digest, max_age_s, timeout_s, robots, engine, "
        "wait_for, headers, cookies, actions, screenshot, changes, tag, ignore); "
        "url: expected a non-empty string; format: expected one of markdown, text, html, raw, "
        "screenshot; "
        f"max_bytes: must be between 4 and {(1 << 53) - 1}; offset: must be between 0 and "
        f"{(1 << 53) - 1}; links: expected true or false; digest: expected 'sha256:' and 64 "
        "lowercase hex digits; timeout_s: expected a number of seconds above 0"
    )
    assert info.value.status == 422


@pytest.mark.parametrize("value", [1 << 63, 10**30, -(1 << 63), 2.5, "12"])
def test_integers_out_of_range_never_pass(value: object) -> None:
    with pytest.raises(BadRequest):
        parse_options({"url": "http://pub.test/", "offset": value})


def test_missing_and_overlong_url() -> None:
    with pytest.raises(BadRequest, match="url: required"):
        parse_options({})
    with pytest.raises(BadRequest, match="url: longer than 8192 bytes"):
        parse_options({"url": "http://pub.test/" + "a" * 8192})


def test_clamps_add_one_warning() -> None:
    opts = parse_options({"url": "http://pub.test/", "max_bytes": 10 << 20, "timeout_s": 999})
    assert apply_class(opts, "restricted", CLASSES.restricted) == Effective(
        64 << 10, 20.0, ("clamped",)
    )
    fleet = apply_class(parse_options({"url": "http://pub.test/"}), "fleet", CLASSES.fleet)
    assert fleet == Effective(1 << 20, 30.0, ())
    small = apply_class(
        parse_options({"url": "http://pub.test/", "max_bytes": 9}), "fleet", CLASSES.fleet
    )
    assert small == Effective(9, 30.0, ())


def test_restricted_cannot_skip_robots() -> None:
    opts = parse_options({"url": "http://pub.test/", "robots": False})
    with pytest.raises(BadRequest, match=r"restricted callers always obey robots\.txt"):
        apply_class(opts, "restricted", CLASSES.restricted)
    assert apply_class(opts, "fleet", CLASSES.fleet) == Effective(1 << 20, 30.0, ())
