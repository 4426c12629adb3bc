"""Page actions end to end: real Chromium, real loopback upstreams, the real app over HTTP.

Small pages written for each action kind: a "load more" button appending items fetched from
the server, a search box whose typed text appears after Enter (in the page, and through a
form that navigates), an infinite list that loads more when scrolled to the bottom, a block
shown only past a scroll offset, and a button revealing text after a pause (``wait``,
``wait_for``). Then the bounds: a selector that never matches fails naming its step, a
click on a link to a canary name (mapped to loopback with ``[egress.resolve]``) is refused
and the canary sees nothing (a fleet caller, allowed loopback, reaches it: the control), a
``target=_blank`` link opens no popup and sends nothing, a download is refused and
counted, more steps than the class allows is a 422, and the cache key includes the actions.
The same steps through batch targets, MCP, the Python client and ``sift fetch --action``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import types
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
from aiohttp import web

from apphelpers import (
    FLEET_KEY,
    PUBLIC_HOST,
    PUBLIC_NAME,
    RESTRICTED_KEY,
    auth,
    make_settings,
    running_app,
)
from browserhelpers import require_browser
from mcphelpers import call, error_of, mcp_http_session, texts
from servehelpers import SIFT
from sift.client import AsyncClient
from sift.config import BrowserSettings, EgressSettings
from sift.errors import ActionFailed
from upstream import CanaryListener, Upstream, reserve_port

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]

CANARY_NAME = "canary.test"
STEP_TIMEOUT_S = 1.0  # the restricted class's action_timeout_s here: failures come fast
PAGE_DEADLINE_S = 6.0  # the restricted class's browser_timeout_s here

FEED = """<!doctype html><html><head><title>Feed</title></head><body>
<ul id="items"><li>Item 1</li><li>Item 2</li></ul>
<button id="more">Load more</button>
<script>
let page = 1;
document.getElementById("more").addEventListener("click", async () => {
  page += 1;
  const items = await (await fetch("/feed/more?page=" + page)).json();
  for (const text of items) {
    const li = document.createElement("li");
    li.textContent = text;
    document.getElementById("items").append(li);
  }
});
</script></body></html>"""

SEARCH = """<!doctype html><html><head><title>Search</title></head><body>
<input id="q" type="search"><p id="said"></p>
<form id="f" action="/results"><input id="fq" name="q"></form>
<script>
document.getElementById("q").addEventListener("keydown", (e) => {
  const said = document.getElementById("said");
  if (e.key === "Enter") said.textContent = "You searched for " + e.target.value;
});
</script></body></html>"""

INFINITE = """<!doctype html><html><head><title>Endless</title>
<style>li { height: 400px; }</style></head><body>
<ul id="list"><li>Row 1</li><li>Row 2</li><li>Row 3</li></ul>
<p id="past"></p>
<script>
let next = 4, loading = false;
addEventListener("scroll", async () => {
  if (scrollY > 300) document.getElementById("past").textContent = "Scrolled past 300";
  if (loading || innerHeight + scrollY < document.body.scrollHeight - 20) return;
  loading = true;
  const rows = await (await fetch("/infinite/rows?from=" + next)).json();
  for (const text of rows) {
    const li = document.createElement("li");
    li.textContent = text;
    document.getElementById("list").append(li);
  }
  next += rows.length;
  loading = false;
});
</script></body></html>"""

LATE = """<!doctype html><html><head><title>Late</title></head><body>
<button id="reveal">Reveal</button><div id="box"></div>
<script>
document.getElementById("reveal").addEventListener("click", () => setTimeout(() => {
  document.getElementById("box").innerHTML = "<p id='late'>Revealed after a pause.</p>";
}, 400));
</script></body></html>"""


def links_page(canary_port: int, raw_port: int) -> str:
    canary = f"http://{CANARY_NAME}:{canary_port}"
    return f"""<!doctype html><html><head><title>Links</title></head><body>
<p>A page of links.</p>
<a id="away" href="{canary}/steal">away</a>
<a id="away-tls" href="https://{CANARY_NAME}:{raw_port}/steal">away over https</a>
<a id="pop" href="/popped" target="_blank">popup</a>
<a id="popaway" href="{canary}/popup" target="_blank">popup away</a>
<a id="dl" href="/file.bin">download</a>
<a id="private" href="/private">private</a>
</body></html>"""


@dataclasses.dataclass
class Rig:
    client: httpx.AsyncClient
    base: str
    up: Upstream
    canary: Upstream
    raw_canary: CanaryListener  # counts every connection, answers none

    def url(self, path: str) -> str:
        return f"http://{PUBLIC_NAME}:{self.up.port}{path}"

    async def fetch(self, key: str = RESTRICTED_KEY, **body: Any) -> httpx.Response:
        return await self.client.post("/v1/fetch", json=body, headers=auth(key))


def _install(up: Upstream, canary_port: int, raw_port: int) -> None:
    up.page("/feed", FEED)
    up.page("/search", SEARCH)
    up.page("/infinite", INFINITE)
    up.page("/late", LATE)
    up.page("/links", links_page(canary_port, raw_port))
    up.page("/popped", "<p>popped</p>")
    up.page("/ping", "pong", content_type="text/plain")
    up.page(
        "/busy",
        "<p>A page that polls without end.</p><button id='x'>x</button>"
        # /hang never answers: the network stays busy however slowly a loaded machine runs
        # the poll (a renderer stalled past network_quiet_s let the page settle: a 200).
        "<script>fetch('/hang'); setInterval(() => fetch('/ping'), 100);</script>",
    )
    up.page("/private", "<p>kept from robots</p>")
    up.page("/robots.txt", "User-agent: *\nDisallow: /private\n", content_type="text/plain")
    up.page("/file.bin", b"\0" * 4096, content_type="application/octet-stream",
            headers={"Content-Disposition": "attachment; filename=file.bin"})  # fmt: skip

    async def more(request: web.Request) -> web.StreamResponse:
        page = int(request.query["page"])
        return web.json_response([f"Item {2 * page - 1}", f"Item {2 * page}"])

    async def rows(request: web.Request) -> web.StreamResponse:
        start = int(request.query["from"])
        return web.json_response([f"Row {i}" for i in range(start, start + 3)])

    async def results(request: web.Request) -> web.StreamResponse:
        q = request.query.get("q", "")
        return web.Response(
            text=f"<html><body><h1>Results</h1><p>Results for {q}</p></body></html>",
            content_type="text/html",
        )

    async def hang(request: web.Request) -> web.StreamResponse:
        await asyncio.Event().wait()  # cancelled when the page goes (handler_cancellation)
        raise AssertionError("unreachable")

    up.route("/feed/more", more)
    up.route("/hang", hang)
    up.route("/infinite/rows", rows)
    up.route("/results", results)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def rig(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Rig]:
    """One app, one upstream (pub.test) and one canary (canary.test → 127.0.0.1, which the
    restricted class may not reach; its port is allowed, so only the address rule stops it)."""
    require_browser()
    async with (
        Upstream(host=PUBLIC_HOST) as up,
        Upstream(host="127.0.0.1") as canary,
    ):
        raw_port, socks = reserve_port(["127.0.0.1"])
        raw = CanaryListener(socks.values())
        _install(up, canary.port, raw_port)
        canary.page("/steal", "<p>the canary answered</p>")
        canary.page("/popup", "<p>the canary answered a popup</p>")
        settings = make_settings(tmp_path_factory.mktemp("actions"), upstream_port=up.port)
        restricted = dataclasses.replace(
            settings.classes.restricted,
            extra_ports=(up.port, canary.port, raw_port),
            action_timeout_s=STEP_TIMEOUT_S,
            browser_timeout_s=PAGE_DEADLINE_S,
        )
        settings = dataclasses.replace(
            settings,
            classes=dataclasses.replace(settings.classes, restricted=restricted),
            browser=dataclasses.replace(BrowserSettings(), network_quiet_s=0.2),
            egress=EgressSettings(
                extra_public_cidrs=("127.0.1.0/24",),
                resolve=types.MappingProxyType(
                    {PUBLIC_NAME: (PUBLIC_HOST,), CANARY_NAME: ("127.0.0.1",)}
                ),
            ),
        )
        with raw:
            async with (
                running_app(settings) as base,
                httpx.AsyncClient(base_url=base, timeout=60) as client,
            ):
                yield Rig(client, base, up, canary, raw)


def steps_of(env: dict[str, Any]) -> list[dict[str, Any]]:
    """The outcomes without their times (``ms`` is checked to be a whole number)."""
    assert all(isinstance(o["ms"], int) and o["ms"] >= 0 for o in env["actions"])
    return [{k: v for k, v in o.items() if k != "ms"} for o in env["actions"]]


def ok(*kinds: str) -> list[dict[str, Any]]:
    return [{"step": i, "action": k, "ok": True} for i, k in enumerate(kinds)]


CLICK_MORE = {"action": "click", "selector": "#more"}


# -- each kind ------------------------------------------------------------------------------


async def test_click_load_more_twice(rig: Rig) -> None:
    more = rig.up.hits["/feed/more"]
    by_text = {"action": "click", "selector": "text=Load more"}  # Playwright's text selector
    r = await rig.fetch(
        url=rig.url("/feed?t=click"), actions=[CLICK_MORE, by_text], selector="#items"
    )
    assert r.status_code == 200, r.text
    env = r.json()
    assert env["engine"] == "browser"
    assert env["content"] == "\n".join(f"- Item {i}" for i in range(1, 7))
    assert steps_of(env) == ok("click", "click")
    assert env["warnings"] == []
    assert rig.up.hits["/feed/more"] == more + 2


async def test_type_then_press_enter(rig: Rig) -> None:
    actions = [
        {"action": "type", "selector": "#q", "text": "solar panels"},
        {"action": "press", "key": "Enter"},  # the focused field: the one just typed into
    ]
    env = (await rig.fetch(url=rig.url("/search"), actions=actions, selector="#said")).json()
    assert env["content"] == "You searched for solar panels"
    assert steps_of(env) == ok("type", "press")

    # Enter in a form navigates (same origin): the page read is the one it led to.
    actions = [
        {"action": "type", "selector": "#fq", "text": "tide tables"},
        {"action": "press", "selector": "#fq", "key": "Enter"},
    ]
    env = (await rig.fetch(url=rig.url("/search"), actions=actions)).json()
    assert (env["final_url"], env["content"]) == (
        rig.url("/results?q=tide+tables"),
        "# Results\n\nResults for tide tables",
    )
    assert steps_of(env) == ok("type", "press")


async def test_scroll_loads_an_infinite_list(rig: Rig) -> None:
    bottom = {"action": "scroll", "to": "bottom"}
    rows = rig.up.hits["/infinite/rows"]
    env = (
        await rig.fetch(url=rig.url("/infinite"), actions=[bottom, bottom], selector="#list")
    ).json()
    assert env["content"] == "\n".join(f"- Row {i}" for i in range(1, 10))
    assert steps_of(env) == ok("scroll", "scroll")
    assert rig.up.hits["/infinite/rows"] == rows + 2

    by_pixels = [{"action": "scroll", "pixels": 500}]
    env = (await rig.fetch(url=rig.url("/infinite"), actions=by_pixels, selector="#past")).json()
    assert env["content"] == "Scrolled past 300"
    assert steps_of(env) == ok("scroll")


async def test_wait_for_and_wait(rig: Rig) -> None:
    reveal = {"action": "click", "selector": "#reveal"}
    for step in ({"action": "wait_for", "selector": "#late"}, {"action": "wait", "ms": 1000}):
        env = (
            await rig.fetch(url=rig.url("/late"), actions=[reveal, step], selector="#box")
        ).json()
        assert env["content"] == "Revealed after a pause.", step
        assert steps_of(env) == ok("click", step["action"])


# -- bounds ---------------------------------------------------------------------------------


async def test_a_failing_step_is_named(rig: Rig) -> None:
    missing = {"action": "click", "selector": "#nope"}
    r = await rig.fetch(url=rig.url("/feed?t=fail"), actions=[CLICK_MORE, missing])
    assert r.status_code == 422
    assert r.json() == {  # the one error envelope, exactly
        "error": {
            "code": "action_failed",
            "message": "actions[1] (click '#nope'): no element matching it could be clicked "
            "within 1 s (absent, hidden or covered)",
            "hint": ActionFailed.default_hint,
        }
    }
    r = await rig.fetch(url=rig.url("/feed?t=fail"), actions=[{"action": "press", "key": "Foo"}])
    assert (r.status_code, r.json()["error"]["code"]) == (422, "action_failed")
    assert r.json()["error"]["message"].startswith("actions[0] (press 'Foo'): ")
    assert 'Unknown key: "Foo"' in r.json()["error"]["message"]
    # The next request works.
    r = await rig.fetch(url=rig.url("/feed?t=fail"), actions=[CLICK_MORE], selector="#items")
    assert r.json()["content"] == "- Item 1\n- Item 2\n- Item 3\n- Item 4"


async def test_the_page_deadline_bounds_every_step(rig: Rig) -> None:
    """A page whose network is never quiet: the first click's settling runs up to the
    deadline, less the time kept for reading, so the second step has none left: a timeout
    naming that step (no timing is asserted)."""
    click = {"action": "click", "selector": "#x"}
    r = await rig.fetch(url=rig.url("/busy"), wait_for="#x", actions=[click, click])
    assert r.status_code == 504, r.text
    err = r.json()["error"]
    assert err["code"] == "browser_timeout"
    assert err["message"].startswith("actions[1] (click '#x'): ")
    # The next request works.
    r = await rig.fetch(url=rig.url("/feed?t=deadline"), actions=[CLICK_MORE], selector="#items")
    assert r.json()["content"] == "- Item 1\n- Item 2\n- Item 3\n- Item 4"


async def test_a_step_leading_to_a_refused_name_is_refused(rig: Rig) -> None:
    away = [{"action": "click", "selector": "#away"}]
    r = await rig.fetch(url=rig.url("/links"), actions=away)
    # For a restricted caller a name resolving only to refused addresses is answered as a
    # name that does not resolve (internal names cannot be probed): docs/errors.md.
    assert r.status_code == 502, r.text
    assert r.json()["error"]["code"] == "dns_failure"
    assert r.json()["error"]["message"] == (
        "actions[0] (click '#away'): The host name 'canary.test' does not resolve to an "
        "address this caller may reach."
    )
    # Over https the refusal is of a tunnel, and the page lands on Chromium's error page.
    r = await rig.fetch(
        url=rig.url("/links"), actions=[{"action": "click", "selector": "#away-tls"}]
    )
    assert (r.status_code, r.json()["error"]["message"]) == (
        502,
        "actions[0] (click '#away-tls'): The host name 'canary.test' does not resolve to an "
        "address this caller may reach.",
    )
    assert (rig.canary.requests, rig.raw_canary.accepted()) == ([], 0)
    # The control: a fleet caller, allowed loopback, follows the same link to the canary.
    r = await rig.fetch(FLEET_KEY, url=rig.url("/links"), actions=away, robots=False)
    assert r.status_code == 200, r.text
    assert r.json()["final_url"] == f"http://{CANARY_NAME}:{rig.canary.port}/steal"
    assert r.json()["content"] == "the canary answered"
    assert rig.canary.hits["/steal"] == 1


async def test_a_step_leading_to_a_page_robots_disallows(rig: Rig) -> None:
    private = [{"action": "click", "selector": "#private"}]
    r = await rig.fetch(url=rig.url("/links"), actions=private)
    assert (r.status_code, r.json()["error"]["code"], r.json()["error"]["message"]) == (
        403,
        "robots_disallowed",
        f"robots.txt disallows {rig.url('/private')}, where the page actions led.",
    )
    # A fleet caller that may ignore robots.txt reads it.
    r = await rig.fetch(FLEET_KEY, url=rig.url("/links"), actions=private, robots=False)
    assert (r.status_code, r.json()["content"]) == (200, "kept from robots")


async def test_a_get_query_carries_actions_as_json(rig: Rig) -> None:
    params = {
        "url": rig.url("/feed?t=get"),
        "selector": "#items",
        "actions": json.dumps([CLICK_MORE]),
    }
    r = await rig.client.get("/v1/fetch", params=params, headers=auth(RESTRICTED_KEY))
    assert r.status_code == 200, r.text
    assert r.json()["content"] == "- Item 1\n- Item 2\n- Item 3\n- Item 4"
    params["actions"] = "[{"
    r = await rig.client.get("/v1/fetch", params=params, headers=auth(RESTRICTED_KEY))
    assert r.json()["error"]["message"] == (
        'invalid options: actions: expected a JSON list of steps like [{"action": "click", '
        '"selector": "#more"}]'
    )


async def test_popups_are_never_opened_and_downloads_refused(rig: Rig) -> None:
    actions = [
        {"action": "click", "selector": "#pop"},
        {"action": "click", "selector": "#popaway"},
        {"action": "click", "selector": "#dl"},
    ]
    env = (await rig.fetch(url=rig.url("/links"), actions=actions)).json()
    assert env["final_url"] == rig.url("/links")
    assert env["content"].startswith("A page of links.")
    assert steps_of(env) == [
        *ok("click", "click"),
        {"step": 2, "action": "click", "ok": True, "downloads_refused": 1},
    ]
    # Neither popup sent a request: not to the page's origin, not to the canary.
    assert rig.up.hits["/popped"] == 0
    assert rig.canary.hits["/popup"] == 0


async def test_steps_per_class_and_engine_http(rig: Rig) -> None:
    feeds = rig.up.hits["/feed"]
    wait = {"action": "wait", "ms": 1}
    r = await rig.fetch(url=rig.url("/feed"), actions=[wait] * 11)
    assert (r.status_code, r.json()["error"]["message"]) == (
        422,
        "actions: 11 steps exceed this class's limit of 10 (classes.restricted.max_actions)",
    )
    r = await rig.fetch(url=rig.url("/feed"), actions=[wait], engine="http")
    assert (r.status_code, r.json()["error"]["message"]) == (
        422,
        "actions: only the browser runs page actions",
    )
    r = await rig.fetch(url=rig.url("/feed"), actions=[{"action": "wait", "ms": 1500}])
    assert r.json()["error"]["message"] == (
        "actions[0] (wait 1500 ms): longer than one step may take, 1 s "
        "(classes.restricted.action_timeout_s)"
    )
    r = await rig.fetch(url=rig.url("/feed"), actions=[CLICK_MORE, {"action": "hover"}])
    assert r.json()["error"]["message"] == (
        "invalid options: actions[1]: action: expected one of click, type, press, scroll, "
        "wait, wait_for"
    )
    assert rig.up.hits["/feed"] == feeds  # refused before anything was loaded


async def test_the_cache_key_includes_the_actions(rig: Rig) -> None:
    url = rig.url("/feed?t=cache")
    plain = (await rig.fetch(url=url, engine="browser", selector="#items")).json()
    assert (plain["cache"], "actions" not in plain) == ("miss", True)
    assert plain["content"] == "- Item 1\n- Item 2"
    once = (await rig.fetch(url=url, actions=[CLICK_MORE], selector="#items")).json()
    assert (once["cache"], once["content"]) == ("miss", "- Item 1\n- Item 2\n- Item 3\n- Item 4")
    assert once["digest"] != plain["digest"]
    # The same steps (keys in another order): the same entry, with the steps' outcomes.
    same = [{"selector": "#more", "action": "click"}]
    again = (await rig.fetch(url=url, actions=same, selector="#items")).json()
    assert (again["cache"], again["digest"], again["actions"]) == (
        "hit",
        once["digest"],
        once["actions"],
    )
    # Without actions: the page without them, still cached as such.
    bare = (await rig.fetch(url=url, engine="browser", selector="#items")).json()
    assert (bare["cache"], bare["digest"], "actions" in bare) == ("hit", plain["digest"], False)
    # Other steps: another entry.
    twice = (await rig.fetch(url=url, actions=[CLICK_MORE, CLICK_MORE], selector="#items")).json()
    assert (twice["cache"], twice["content"].count("- Item")) == ("miss", 6)


# -- front ends -----------------------------------------------------------------------------


async def test_batch_targets_carry_actions(rig: Rig) -> None:
    body = {
        "targets": [
            {
                "url": rig.url("/feed?t=batch"),
                "options": {"actions": [CLICK_MORE], "selector": "#items"},
            },
            {"url": rig.url("/feed?t=batch"), "options": {"actions": [{"action": "click"}]}},
        ]
    }
    headers = {**auth(RESTRICTED_KEY), "Idempotency-Key": "actions-1"}
    r = await rig.client.post("/v1/batch", json=body, headers=headers)
    assert (r.status_code, r.json()["error"]["message"]) == (
        422,
        "1 of 2 targets are invalid: [1] invalid options: actions[0]: click needs selector",
    )
    body["targets"] = body["targets"][:1]
    r = await rig.client.post("/v1/batch", json=body, headers=headers)
    assert r.status_code == 202, r.text
    job = r.json()["id"]
    for _ in range(600):
        view = (await rig.client.get(f"/v1/batch/{job}", headers=auth(RESTRICTED_KEY))).json()
        if view["status"] not in ("queued", "running"):
            break
        await asyncio.sleep(0.05)
    assert view["status"] == "done", view
    page = (await rig.client.get(f"/v1/batch/{job}/results", headers=auth(RESTRICTED_KEY))).json()
    result = page["items"][0]["result"]
    assert result["content"] == "- Item 1\n- Item 2\n- Item 3\n- Item 4"
    assert steps_of(result) == ok("click")


async def test_mcp_client_and_cli(rig: Rig) -> None:
    actions = [CLICK_MORE, CLICK_MORE, CLICK_MORE]
    async with mcp_http_session(rig.base, RESTRICTED_KEY) as session:
        result = await call(
            session,
            "fetch",
            {"url": rig.url("/feed?t=mcp"), "actions": actions, "selector": "#items"},
        )
        body, foot = texts(result)
        assert body == "\n".join(f"- Item {i}" for i in range(1, 9))
        assert "\nactions: click ok, click ok, click ok\n" in foot
        bad = error_of(
            await call(session, "fetch", {"url": rig.url("/feed"), "actions": [{"action": "x"}]})
        )
        assert bad["message"].startswith("invalid options: actions[0]: action: expected one of")

    async with AsyncClient(rig.base, RESTRICTED_KEY) as client:
        env = await client.fetch(rig.url("/feed?t=mcp"), actions=actions, selector="#items")
        assert (env.cache, env.content) == ("hit", body)  # MCP's load, from the cache
        assert [o["action"] for o in env.actions or []] == ["click"] * 3

    proc = await asyncio.create_subprocess_exec(
        *SIFT, "fetch", rig.url("/feed?t=cli"),
        "--server", rig.base, "--key", RESTRICTED_KEY, "--selector", "#items", "--json",
        "--action", "click:#more", "--action", '{"action": "click", "selector": "#more"}',
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "SIFT_KEY": ""},
    )  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    env_json = json.loads(out)
    assert env_json["content"] == "\n".join(f"- Item {i}" for i in range(1, 7))
    assert steps_of(env_json) == ok("click", "click")


# -- with the browser's other options ------------------------------------------------------


async def test_actions_then_screenshot_behind_a_login(rig: Rig) -> None:
    """Issue 20's three request options together: the caller's header reaches the page and
    its script's request (same origin; the upstream answers 403 without it), the steps run,
    and the screenshot is taken after them, of the page they left."""
    seen: list[str] = []

    async def login_feed(request: web.Request) -> web.StreamResponse:
        seen.append(request.path)
        if request.headers.get("X-Session") != "s1":
            return web.Response(status=403, text="log in first")
        if request.path.endswith("/more"):
            return web.json_response(["Item 3", "Item 4"])
        page = FEED.replace('"/feed/more?page="', '"/login-feed/more?page="')
        return web.Response(text=page, content_type="text/html")

    rig.up.route("/login-feed", login_feed, prefix=True)
    r = await rig.fetch(
        FLEET_KEY,
        url=rig.url("/login-feed"),
        actions=[CLICK_MORE],
        headers={"X-Session": "s1"},
        screenshot={"type": "png", "width": 800, "height": 600},
        selector="#items",
    )
    assert r.status_code == 200, r.text
    env = r.json()
    assert env["content"] == "\n".join(f"- Item {i}" for i in range(1, 5))
    assert steps_of(env) == ok("click")
    assert seen == ["/login-feed", "/login-feed/more"]
    shot = env["screenshot"]
    assert (shot["type"], shot["width"], shot["height"]) == ("png", 800, 600)
    image = await rig.client.get(shot["url"], headers=auth(FLEET_KEY))
    assert image.status_code == 200
    assert image.content[:8] == b"\x89PNG\r\n\x1a\n" and len(image.content) == shot["bytes"]
    # Private (the header) and keyed by its steps: the restricted caller gets none of it.
    other = await rig.client.get(shot["url"], headers=auth(RESTRICTED_KEY))
    assert other.status_code == 404
