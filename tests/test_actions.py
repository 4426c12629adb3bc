"""Page actions without a browser: the step shape checked strictly (every problem naming its
step), the class bounds, the canonical cache key, ``sift fetch --action``'s short form, crawl
options and the settings. The steps running in Chromium: tests/test_browser_actions.py."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from sift.browser.actions import Action, actions_key, check_for_class
from sift.cli.actionargs import parse_action_flag
from sift.config import CallerClass, Settings, load_settings
from sift.crawl.spec import parse_crawl
from sift.errors import BadRequest, ConfigError
from sift.fetch import restricted_policy
from sift.options import FetchOptions, apply_class, parse_options
from sift.service.cache import page_key_for
from sift.snapshot import Snapshot

CLASSES = Settings().classes
URL = "https://pub.test/a"


def problems_of(actions: object) -> str:
    with pytest.raises(BadRequest) as info:
        parse_options({"url": URL, "actions": actions})
    return info.value.message.removeprefix("invalid options: ")


def test_every_kind_parses_to_its_fields() -> None:
    steps: list[dict[str, object]] = [
        {"action": "click", "selector": "#more"},
        {"action": "type", "selector": "#q", "text": "solar panels"},
        {"action": "type", "selector": "#q", "text": ""},  # clears the field
        {"action": "press", "key": "Enter"},
        {"action": "press", "key": "Control+A", "selector": "#q"},
        {"action": "scroll", "to": "bottom"},
        {"action": "scroll", "pixels": -800, "to": None},  # null is absent
        {"action": "wait", "ms": 500},
        {"action": "wait_for", "selector": "#results li"},
    ]
    opts = parse_options({"url": URL, "actions": steps})
    assert opts.actions == (
        Action("click", selector="#more"),
        Action("type", selector="#q", text="solar panels"),
        Action("type", selector="#q", text=""),
        Action("press", key="Enter"),
        Action("press", selector="#q", key="Control+A"),
        Action("scroll", to="bottom"),
        Action("scroll", pixels=-800),
        Action("wait", ms=500),
        Action("wait_for", selector="#results li"),
    )
    assert [a.to_json() for a in opts.actions] == [
        {k: v for k, v in s.items() if v is not None} for s in steps
    ]
    assert parse_options({"url": URL, "actions": []}).actions == ()


def test_every_problem_names_its_step() -> None:
    assert problems_of(
        [
            "click #more",
            {"action": "hover", "selector": "a"},
            {"action": "click"},
            {"action": "click", "selector": "#a", "text": "x", "key": "Enter"},
            {"action": "type", "selector": "", "text": "x" * 2001},
            {"action": "press", "key": "Enter Enter"},
            {"action": "scroll"},
            {"action": "scroll", "to": "bottom", "pixels": 5},
            {"action": "scroll", "to": "left"},
            {"action": "scroll", "pixels": 0},
            {"action": "wait", "ms": True},
            {"action": "wait", "ms": 60_001},
            {"action": "wait_for", "selector": "x" * 1025},
        ]
    ) == (
        'actions[0]: expected an object like {"action": "click", "selector": "#more"}; '
        "actions[1]: action: expected one of click, type, press, scroll, wait, wait_for; "
        "actions[2]: click needs selector; "
        "actions[3]: click takes no key, text (its fields: selector); "
        "actions[4]: selector: expected a selector of 1-1024 chars; "
        "actions[4]: text: expected a string of at most 2000 chars; "
        "actions[5]: key: expected a key name such as Enter, ArrowDown, a or Control+A; "
        'actions[6]: scroll needs either to ("bottom" or "top") or pixels; '
        'actions[7]: scroll needs either to ("bottom" or "top") or pixels; '
        'actions[8]: to: expected "bottom" or "top"; '
        "actions[9]: pixels: expected a non-zero integer within ±1000000; "
        "actions[10]: ms: expected milliseconds from 1 to 60000; "
        "actions[11]: ms: expected milliseconds from 1 to 60000; "
        "actions[12]: selector: expected a selector of 1-1024 chars"
    )
    assert problems_of({"action": "click"}) == (
        'actions: expected a list of steps like [{"action": "click", "selector": "#more"}]'
    )
    assert problems_of([{"action": "wait", "ms": 1}] * 101) == "actions: at most 100 steps"


def test_a_query_string_carries_the_steps_as_json() -> None:
    opts = parse_options(
        {"url": URL, "actions": '[{"action": "scroll", "to": "bottom"}]'}, from_query=True
    )
    assert opts.actions == (Action("scroll", to="bottom"),)
    with pytest.raises(BadRequest) as info:
        parse_options({"url": URL, "actions": "scroll:bottom"}, from_query=True)
    assert info.value.message == (
        'invalid options: actions: expected a JSON list of steps like [{"action": "click", '
        '"selector": "#more"}]'
    )


def refusal(steps: list[dict[str, object]], cls: CallerClass = "restricted", **opts: object) -> str:
    parsed = parse_options({"url": URL, "actions": steps, **opts})
    with pytest.raises(BadRequest) as info:
        apply_class(parsed, cls, CLASSES.get(cls))
    return info.value.message


def test_the_class_bounds_the_steps() -> None:
    wait = {"action": "wait", "ms": 1}
    ten = parse_options({"url": URL, "actions": [wait] * 10})
    apply_class(ten, "restricted", CLASSES.restricted)  # the default limit: 10 for restricted
    assert refusal([wait] * 11) == (
        "actions: 11 steps exceed this class's limit of 10 (classes.restricted.max_actions)"
    )
    fifty = parse_options({"url": URL, "actions": [wait] * 50})
    apply_class(fifty, "fleet", CLASSES.fleet)
    assert refusal([wait] * 51, "fleet") == (
        "actions: 51 steps exceed this class's limit of 50 (classes.fleet.max_actions)"
    )
    assert refusal([wait], engine="http") == "actions: only the browser runs page actions"
    assert refusal([{"action": "wait", "ms": 5001}]) == (
        "actions[0] (wait 5001 ms): longer than one step may take, 5 s "
        "(classes.restricted.action_timeout_s)"
    )
    # Waits may not add up to the page's deadline (browser_timeout_s 15, timeout_s within it).
    assert refusal([{"action": "wait", "ms": 5000}] * 3) == (
        "actions: the wait steps add up to 15 s, the whole of the page's deadline of 15 s"
    )
    assert refusal([{"action": "wait", "ms": 2000}], timeout_s=2) == (
        "actions: the wait steps add up to 2 s, the whole of the page's deadline of 2 s"
    )
    for changed in ({"browser": False}, {"max_actions": 0}):
        limits = dataclasses.replace(CLASSES.restricted, **changed)
        with pytest.raises(BadRequest) as info:
            check_for_class((Action("wait", ms=1),), "auto", "restricted", limits, 15.0)
        assert info.value.message == "actions: the restricted class may not use page actions"
    check_for_class((), "http", "restricted", CLASSES.restricted, 15.0)  # no steps: no rule


def test_the_cache_key_is_the_steps_canonical_digest() -> None:
    one = parse_options({"url": URL, "actions": [{"action": "click", "selector": "#m"}]})
    same = parse_options({"url": URL, "actions": [{"selector": "#m", "action": "click"}]})
    other = parse_options({"url": URL, "actions": [{"action": "click", "selector": "#n"}]})
    twice = parse_options({"url": URL, "actions": [{"action": "click", "selector": "#m"}] * 2})
    assert actions_key(one.actions) == actions_key(same.actions)
    assert len({actions_key(o.actions) for o in (one, other, twice)}) == 3
    assert len(actions_key(one.actions)) == 64  # the whole sha256: no forged collisions
    policy = restricted_policy()
    keys = {
        page_key_for(URL, o, policy, "browser")
        for o in (one, same, other, twice, FetchOptions(url=URL))
    }
    assert len(keys) == 4
    assert page_key_for(URL, one, policy, "browser").endswith(
        f"-browser-actions:{actions_key(one.actions)} {URL}"
    )


def test_snapshots_keep_the_outcomes() -> None:
    from sift.render import Rendered

    outcomes = [{"step": 0, "action": "click", "ok": True, "ms": 12}]
    rendered = Rendered(title=None, lang=None, content="x")
    snap = Snapshot(URL, URL, 200, "text/html", 1, "sha256:" + "a" * 64, rendered, b"x")
    assert Snapshot.from_payload(snap.to_payload()).actions is None
    snap = dataclasses.replace(snap, actions=outcomes)
    assert Snapshot.from_payload(snap.to_payload()).actions == outcomes


@pytest.mark.parametrize(
    ("flag", "step"),
    [
        ("click:#more", {"action": "click", "selector": "#more"}),
        ("click:li:nth-child(2) > a", {"action": "click", "selector": "li:nth-child(2) > a"}),
        ("type:#q=solar panels", {"action": "type", "selector": "#q", "text": "solar panels"}),
        (
            "type:input[name=q]=a=b",
            {"action": "type", "selector": "input[name=q]", "text": "a=b"},
        ),
        ("type:[title='x=y']=", {"action": "type", "selector": "[title='x=y']", "text": ""}),
        ("press:Enter", {"action": "press", "key": "Enter"}),
        ("scroll:bottom", {"action": "scroll", "to": "bottom"}),
        ("scroll:top", {"action": "scroll", "to": "top"}),
        ("scroll:-400", {"action": "scroll", "pixels": -400}),
        ("wait:250", {"action": "wait", "ms": 250}),
        ("wait_for:#results li", {"action": "wait_for", "selector": "#results li"}),
        ("wait-for:#r", {"action": "wait_for", "selector": "#r"}),
        ('{"action": "press", "selector": "#q", "key": "Enter"}', None),
    ],
)
def test_the_cli_short_form(flag: str, step: dict[str, object] | None) -> None:
    expected = step or {"action": "press", "selector": "#q", "key": "Enter"}
    assert parse_action_flag(flag) == expected
    parse_options({"url": URL, "actions": [expected]})  # the server takes what it makes


@pytest.mark.parametrize(
    ("flag", "says"),
    [
        ("hover:#a", "expected click:SELECTOR, type:SELECTOR=TEXT"),
        ("click:", "expected click:SELECTOR, type:SELECTOR=TEXT"),
        ("click", "expected click:SELECTOR, type:SELECTOR=TEXT"),
        ("type:#q", "expected type:SELECTOR=TEXT"),
        ("wait:soon", "expected wait:MILLISECONDS"),
        ("scroll:left", "expected scroll:bottom, top or PIXELS"),
        ("{nope", "not valid JSON"),
        ("[1]", "expected click:SELECTOR"),
    ],
)
def test_the_cli_short_form_says_what_is_wrong(flag: str, says: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as info:
        parse_action_flag(flag)
    assert str(info.value).startswith(f"{flag!r}: ")
    assert says in str(info.value)


def test_crawl_options_take_actions_for_every_page() -> None:
    steps = [{"action": "click", "selector": "#more"}]
    spec = parse_crawl(
        {"url": URL, "options": {"actions": steps}}, "restricted", CLASSES.restricted
    )
    assert spec.options == {"actions": steps}
    with pytest.raises(BadRequest) as info:
        parse_crawl(
            {"url": URL, "options": {"actions": steps, "engine": "http"}},
            "restricted",
            CLASSES.restricted,
        )
    assert info.value.message == (
        "invalid crawl request: options: actions: only the browser runs page actions"
    )


def test_settings_bound_the_actions() -> None:
    s = load_settings(None, env={})
    assert (s.classes.restricted.max_actions, s.classes.restricted.action_timeout_s) == (10, 5.0)
    assert (s.classes.fleet.max_actions, s.classes.fleet.action_timeout_s) == (50, 10.0)
    with pytest.raises(ConfigError) as info:
        load_settings(None, env={"SIFT_CLASSES_FLEET_MAX_ACTIONS": "101"})
    assert info.value.message.endswith("classes.fleet.max_actions: must be between 0 and 100")
    with pytest.raises(ConfigError) as info:
        load_settings(None, env={"SIFT_CLASSES_RESTRICTED_ACTION_TIMEOUT_S": "0"})
    assert info.value.message.endswith("classes.restricted.action_timeout_s: must be positive")
