"""Screenshots (``format: "screenshot"``): real Chromium, a loopback upstream, exact values.

One sift and one upstream for the module (one Chromium: a launch costs a second). Each
image is checked by its magic bytes and by its dimensions as Pillow reads them; the class
bounds (pixels, bytes) are broken on purpose and the refusal or the cut checked; the route
serves an image only to a caller a fetch gave it to.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import json
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import mcp.types as types
import pytest
import pytest_asyncio
from PIL import Image

from apphelpers import (
    FLEET2_KEY,
    FLEET_KEY,
    PUBLIC_HOST,
    PUBLIC_NAME,
    RESTRICTED_KEY,
    auth,
    make_settings,
    running_app,
)
from browserhelpers import require_browser
from mcphelpers import call, mcp_http_session, texts
from servehelpers import SIFT
from sift.client import AsyncClient
from sift.errors import NotFound
from upstream import Upstream

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
JPEG_MAGIC = b"\xff\xd8\xff"
# Bytes over the cap in the byte-cap tests: a page of random colours compresses badly.
SMALL_BYTES = 40_000
TITLE = "A page to look at"
PLAIN = (
    f"<html><head><title>{TITLE}</title></head><body style='margin:0;background:#fff'>"
    "<article><h1>Something to see</h1><p>The picture and the text come from one load of "
    "this page, in the browser.</p></article></body></html>"
)
# 50,000 CSS pixels tall: bands of colour, each 1,000 px, so a cut shows in the pixels too.
TALL = (
    "<html><body style='margin:0'>"
    + "".join(
        f"<div style='height:1000px;background:hsl({i * 37 % 360},70%,50%)'>band {i}</div>"
        for i in range(50)
    )
    + "</body></html>"
)


def _noise(rows: int, seed: int) -> str:
    """A grid of 8-px cells of random colours: its PNG grows with its height."""
    rng = random.Random(seed)
    cells = "".join(
        f"<i style='background:#{rng.randrange(1 << 24):06x}'></i>" for _ in range(160 * rows)
    )
    return (
        "<html><head><style>body{margin:0;display:grid;grid-template-columns:repeat(160,8px)}"
        "i{display:block;height:8px}</style></head><body>" + cells + "</body></html>"
    )


def _image(data: bytes) -> Image.Image:
    img = Image.open(io.BytesIO(data))
    img.load()
    return img


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def upstream() -> AsyncIterator[Upstream]:
    async with Upstream(host=PUBLIC_HOST) as up:
        up.page("/plain", PLAIN)
        up.page("/tall", TALL)
        up.page(
            "/site/",
            "<html><body><h1>Home</h1><p>The start of a small site.</p>"
            "<a href='/site/next'>next</a></body></html>",
        )
        up.page("/site/next", "<html><body><h1>Next</h1><p>The second page.</p></body></html>")
        up.page("/noise", _noise(90, 1))
        for i in range(4):
            up.page(f"/evict/{i}", _noise(40, 10 + i))
        yield up


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sift(
    tmp_path_factory: pytest.TempPathFactory, upstream: Upstream
) -> AsyncIterator[httpx.AsyncClient]:
    require_browser()
    settings = make_settings(tmp_path_factory.mktemp("shots"), upstream_port=upstream.port)
    async with (
        running_app(settings) as base,
        httpx.AsyncClient(base_url=base, timeout=60) as client,
    ):
        yield client


def url(upstream: Upstream, path: str) -> str:
    return f"http://{PUBLIC_NAME}:{upstream.port}{path}"


async def shoot(
    client: httpx.AsyncClient, key: str = RESTRICTED_KEY, **body: Any
) -> dict[str, Any]:
    r = await client.post("/v1/fetch", json=body, headers=auth(key))
    assert r.status_code == 200, r.text
    env: dict[str, Any] = r.json()
    return env


async def image_of(
    client: httpx.AsyncClient, env: dict[str, Any], key: str = RESTRICTED_KEY
) -> bytes:
    r = await client.get(env["screenshot"]["url"], headers=auth(key))
    assert r.status_code == 200, r.text
    return r.content


async def refused(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    r = await client.post("/v1/fetch", json=body, headers=auth(RESTRICTED_KEY))
    assert r.status_code == 422, r.text
    err: dict[str, Any] = r.json()["error"]
    return err


async def test_png_of_the_viewport_with_the_text(
    sift: httpx.AsyncClient, upstream: Upstream
) -> None:
    env = await shoot(sift, url=url(upstream, "/plain"), format="screenshot")
    assert (env["engine"], env["format"], env["title"]) == ("browser", "screenshot", TITLE)
    assert "The picture and the text come from one load" in env["content"]
    shot = env["screenshot"]
    data = await image_of(sift, env)
    assert data.startswith(PNG_MAGIC)
    assert shot == {
        "digest": "sha256:" + hashlib.sha256(data).hexdigest(),
        "type": "png",
        "bytes": len(data),
        "width": 1280,
        "height": 720,
        "url": f"/v1/screenshots/{shot['digest']}",
    }
    assert _image(data).size == (1280, 720)
    assert env["warnings"] == []


@pytest.mark.parametrize(
    ("kind", "magic", "pil"), [("jpeg", JPEG_MAGIC, "JPEG"), ("webp", b"RIFF", "WEBP")]
)
async def test_jpeg_and_webp_at_a_chosen_viewport(
    sift: httpx.AsyncClient, upstream: Upstream, kind: str, magic: bytes, pil: str
) -> None:
    env = await shoot(
        sift,
        url=url(upstream, "/plain"),
        screenshot={"type": kind, "width": 800, "height": 600, "quality": 70},
    )
    data = await image_of(sift, env)
    assert data.startswith(magic)
    img = _image(data)
    assert (img.format, img.size) == (pil, (800, 600))
    assert (env["format"], env["screenshot"]["type"], env["screenshot"]["width"]) == (
        "screenshot",
        kind,
        800,
    )


async def test_a_50000_px_page_is_cut_at_the_class_maximum(
    sift: httpx.AsyncClient, upstream: Upstream
) -> None:
    """Restricted: 4,194,304 pixels at 1280 px wide is 3,276 rows; fleet: 16,777,216 → 13,107."""
    for key, rows in ((RESTRICTED_KEY, 3276), (FLEET_KEY, 13107)):
        env = await shoot(sift, key, url=url(upstream, "/tall"), screenshot={"full_page": True})
        assert (env["screenshot"]["width"], env["screenshot"]["height"]) == (1280, rows)
        assert env["warnings"] == ["screenshot_cut"]
        img = _image(await image_of(sift, env, key)).convert("RGB")
        assert img.size == (1280, rows)
        # The bands are there: band 0 at the top, band 3 at 3,000-3,999 px.
        assert img.getpixel((640, 500)) != img.getpixel((640, 3100))


async def test_a_full_page_that_fits_is_whole(sift: httpx.AsyncClient, upstream: Upstream) -> None:
    env = await shoot(
        sift,
        url=url(upstream, "/plain"),
        screenshot={"full_page": True, "width": 640, "height": 400},
    )
    # The page is shorter than its viewport: the whole page is the viewport.
    assert (env["screenshot"]["width"], env["screenshot"]["height"]) == (640, 400)
    assert env["warnings"] == []


async def test_refusals(sift: httpx.AsyncClient, upstream: Upstream) -> None:
    target = url(upstream, "/plain")
    err = await refused(sift, url=target, format="screenshot", engine="http")
    assert err["message"] == (
        "format: screenshots are taken by the browser; engine http cannot take one"
    )
    err = await refused(sift, url=target, screenshot={"width": 4096, "height": 2048})
    assert err["message"] == (
        "screenshot: a 4096x2048 viewport is 8388608 pixels, over the 4194304 your class may have"
    )
    err = await refused(sift, url=target, screenshot={"quality": 50})
    assert err["message"] == "invalid options: screenshot.quality: only for type jpeg or webp"
    err = await refused(sift, url=target, format="text", screenshot={})
    assert err["message"] == "invalid options: screenshot: only with format screenshot"
    err = await refused(sift, url=target, screenshot={"width": 0, "kind": "png"})
    assert err["message"] == "invalid options: screenshot: unknown field kind"
    err = await refused(sift, url=target, screenshot={"width": 20000})
    assert err["message"] == (
        "invalid options: screenshot.width: expected an integer from 1 to 16384"
    )
    r = await sift.get(
        "/v1/fetch", params={"url": target, "screenshot": "{}"}, headers=auth(RESTRICTED_KEY)
    )
    assert r.status_code == 422
    assert r.json()["error"]["message"] == (
        "invalid options: screenshot: its options go in a POST body; a query takes "
        "format=screenshot"
    )


async def test_the_route_serves_only_callers_given_the_image(
    sift: httpx.AsyncClient, upstream: Upstream
) -> None:
    env = await shoot(sift, FLEET_KEY, url=url(upstream, "/plain"), screenshot={"width": 1000})
    path = env["screenshot"]["url"]
    assert (await sift.get(path, headers=auth(FLEET_KEY))).status_code == 200
    other = await sift.get(path, headers=auth(FLEET2_KEY))
    assert other.status_code == 404
    assert other.json()["error"]["code"] == "not_found"
    assert (await sift.get(path)).status_code == 401
    missing = "/v1/screenshots/sha256:" + "0" * 64
    assert (await sift.get(missing, headers=auth(FLEET_KEY))).json() == other.json()
    assert (await sift.get("/v1/screenshots/nope", headers=auth(FLEET_KEY))).status_code == 404
    # The other caller fetches the same page: from the cache, and now it may read the image.
    again = await shoot(sift, FLEET2_KEY, url=url(upstream, "/plain"), screenshot={"width": 1000})
    assert (again["cache"], again["screenshot"]) == ("hit", env["screenshot"])
    ok = await sift.get(path, headers=auth(FLEET2_KEY))
    assert (ok.status_code, ok.headers["content-type"]) == (200, "image/png")
    assert ok.headers["cache-control"] == "private, max-age=86400, immutable"


async def test_mcp_fetch_returns_the_image_sized_for_a_vision_model(
    sift: httpx.AsyncClient, upstream: Upstream
) -> None:
    """The viewport (1280x720, 0.92 MP) goes as it is; the cut full page (1280x3276) is
    scaled so its long side is 1568: 1280 * 1568 / 3276 = 612.6 → 612x1568."""
    async with mcp_http_session(str(sift.base_url), RESTRICTED_KEY) as session:
        small = await call(
            session, "fetch", {"url": url(upstream, "/plain"), "format": "screenshot"}
        )
        tall = await call(
            session, "fetch", {"url": url(upstream, "/tall"), "screenshot": {"full_page": True}}
        )
        spec = {"width": 900, "height": 300}
        head = await call(
            session, "fetch", {"url": url(upstream, "/plain"), "screenshot": spec, "max_bytes": 40}
        )
        read_on = texts(head)[-1].split("to read on, call ")[1].split("\n")[0]
        digest = read_on.split('digest="')[1][:-2]
        assert read_on == (
            f"fetch(url={json.dumps(url(upstream, '/plain'))}, max_bytes=40, "
            f'screenshot={{"width":900,"height":300}}, offset=40, digest="{digest}")'
        )
        rest = await call(
            session,
            "fetch",
            {
                "url": url(upstream, "/plain"),
                "screenshot": spec,
                "max_bytes": 40,
                "offset": 40,
                "digest": digest,
            },
        )
    assert small.is_error is False
    text, image, foot = small.content
    assert isinstance(text, types.TextContent) and "one load of this page" in text.text
    assert isinstance(image, types.ImageContent) and image.mime_type == "image/png"
    assert isinstance(foot, types.TextContent)
    data = base64.b64decode(image.data)
    assert _image(data).size == (1280, 720)
    digest = "sha256:" + hashlib.sha256(data).hexdigest()  # as stored: not re-encoded
    assert foot.text.endswith(
        f"\nscreenshot: png 1280x720 | full size: GET /v1/screenshots/{digest}"
    )
    image = tall.content[1]
    assert isinstance(image, types.ImageContent)
    assert _image(base64.b64decode(image.data)).size == (612, 1568)
    foot = tall.content[2]
    assert isinstance(foot, types.TextContent)
    # Reading on continues the text of the same load (the picture came with the first part).
    assert rest.is_error is False
    assert [type(c) for c in rest.content] == [types.TextContent, types.TextContent]
    assert (
        texts(head)[0] + texts(rest)[0]
        == texts(small)[0][: len(texts(head)[0]) + len(texts(rest)[0])]
    )
    assert "\nwarnings: screenshot_cut\nscreenshot: png 1280x3276, shown scaled to 612x1568 | " in (
        foot.text
    )


async def test_client_returns_the_bytes(sift: httpx.AsyncClient, upstream: Upstream) -> None:
    async with AsyncClient(str(sift.base_url), RESTRICTED_KEY) as client:
        env = await client.fetch(
            url(upstream, "/plain"), screenshot={"type": "jpeg", "width": 640, "height": 480}
        )
        assert env.screenshot is not None
        data = await client.screenshot(env)
        assert data == await client.screenshot(env.screenshot["digest"])
    assert data.startswith(JPEG_MAGIC)
    assert (len(data), _image(data).size) == (env.screenshot["bytes"], (640, 480))
    async with AsyncClient(str(sift.base_url), FLEET2_KEY) as other:
        with pytest.raises(NotFound):
            await other.screenshot(env)


async def test_cli_writes_the_file(
    sift: httpx.AsyncClient, upstream: Upstream, tmp_path: Path
) -> None:
    out = tmp_path / "page.webp"
    proc = await asyncio.create_subprocess_exec(
        *SIFT,
        "fetch",
        url(upstream, "/plain"),
        "--server",
        str(sift.base_url),
        "--key",
        RESTRICTED_KEY,
        "--screenshot",
        str(out),
        "--viewport",
        "900x500",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, stderr
    assert "one load of this page" in stdout.decode()
    data = out.read_bytes()
    assert (data[:4], data[8:12], _image(data).size) == (b"RIFF", b"WEBP", (900, 500))
    assert stderr.decode() == (
        f"sift: screenshot 900x500 webp ({len(data)} bytes) written to {out}\n"
    )


async def test_a_batch_result_names_the_screenshot(
    sift: httpx.AsyncClient, upstream: Upstream
) -> None:
    body = {
        "targets": [url(upstream, "/plain"), {"url": url(upstream, "/tall"), "options": {}}],
        "options": {"screenshot": {"width": 700, "height": 400}},
    }
    headers = {**auth(RESTRICTED_KEY), "Idempotency-Key": "shots-1"}
    r = await sift.post("/v1/batch", json=body, headers=headers)
    assert r.status_code == 202, r.text
    job = r.json()["id"]
    for _ in range(600):
        view = (await sift.get(f"/v1/batch/{job}", headers=auth(RESTRICTED_KEY))).json()
        if view["status"] not in ("queued", "running"):
            break
        await asyncio.sleep(0.1)
    assert view["status"] == "done"
    items = (await sift.get(f"/v1/batch/{job}/results", headers=auth(RESTRICTED_KEY))).json()
    for item in items["items"]:
        shot = item["result"]["screenshot"]
        assert (item["result"]["format"], shot["width"], shot["height"]) == ("screenshot", 700, 400)
        data = await image_of(sift, item["result"])
        assert "sha256:" + hashlib.sha256(data).hexdigest() == shot["digest"]


async def test_a_crawl_shoots_every_page(sift: httpx.AsyncClient, upstream: Upstream) -> None:
    body = {
        "url": url(upstream, "/site/"),
        "max_pages": 2,
        "sitemap": False,
        "options": {"screenshot": {"width": 500, "height": 300, "type": "jpeg"}},
    }
    headers = {**auth(RESTRICTED_KEY), "Idempotency-Key": "shots-crawl"}
    r = await sift.post("/v1/crawl", json=body, headers=headers)
    assert r.status_code == 202, r.text
    job = r.json()["id"]
    for _ in range(600):
        view = (await sift.get(f"/v1/batch/{job}", headers=auth(RESTRICTED_KEY))).json()
        if view["status"] not in ("queued", "running"):
            break
        await asyncio.sleep(0.1)
    assert view["status"] == "done"
    items = (await sift.get(f"/v1/batch/{job}/results", headers=auth(RESTRICTED_KEY))).json()
    assert [i["url"] for i in items["items"]] == [
        url(upstream, "/site/"),
        url(upstream, "/site/next"),
    ]
    for item in items["items"]:
        data = await image_of(sift, item["result"])
        assert (data[:3], _image(data).size) == (JPEG_MAGIC, (500, 300))
