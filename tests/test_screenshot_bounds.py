"""Screenshot budgets broken on purpose: the class's bytes, the content cache's byte budget,
the vision size; and the screenshot store itself on a real SQLite file.

The API tests share one sift whose restricted class may keep 40,000 bytes per screenshot
and whose content cache holds 1,000,000 bytes. Their pages paint seeded noise on a canvas
as large as the viewport: noise does not compress, so an image's bytes follow its pixels.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from PIL import Image

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
from servehelpers import SIFT
from sift.config import CacheSettings
from sift.dcache import DB
from sift.mcp.image import fitted_size
from syncupstream import serve_pages
from upstream import Upstream

TIGHT_BYTES = 40_000
CACHE_BYTES = 1_000_000


def _noise(seed: int) -> str:
    """A canvas the size of the viewport, filled with xorshift noise from ``seed``."""
    return (
        "<html><body style='margin:0;overflow:hidden'><canvas id=c></canvas><script>"
        "const c = document.getElementById('c'), w = innerWidth, h = innerHeight;"
        "c.width = w; c.height = h; const x = c.getContext('2d'), d = x.createImageData(w, h);"
        f"let s = {2 * seed + 1};"  # odd: xorshift never leaves 0
        "for (let i = 0; i < d.data.length; i++) {"
        "  s ^= s << 13; s ^= s >>> 17; s ^= s << 5;"
        "  d.data[i] = i % 4 == 3 ? 255 : s & 255; }"
        "x.putImageData(d, 0, 0);</script></body></html>"
    )


def _size(data: bytes) -> tuple[int, int]:
    with Image.open(io.BytesIO(data)) as img:
        return img.size


# -- the vision size (no browser) ----------------------------------------------------------


def test_vision_sizes() -> None:
    """Both of the model's limits: the long side (1568) and the area (1.15 MP)."""
    assert fitted_size(1280, 720) == (1280, 720)
    assert fitted_size(1568, 700) == (1568, 700)
    assert fitted_size(3000, 1000) == (1568, 522)  # long side
    assert fitted_size(1500, 1500) == (1072, 1072)  # area: sqrt(1,150,000) = 1072.4
    assert fitted_size(1280, 3276) == (612, 1568)
    assert fitted_size(1280, 50000) == (40, 1568)


# -- the store (real SQLite, no browser) ---------------------------------------------------


def test_shots_are_granted_per_caller_and_evicted_in_lru_order(tmp_path: Path) -> None:
    db = DB.open(tmp_path / "c.db", max_bytes=2500, compress_level=0)
    try:
        a = db.put_shot(b"A" * 1000, "png", 10, 10, now=1)
        assert a == "sha256:" + hashlib.sha256(b"A" * 1000).hexdigest()
        assert db.get_shot(a, "ann", now=2) is None  # stored, but given to nobody yet
        assert db.grant_shot(a, "ann", now=2) is True
        got = db.get_shot(a, "ann", now=3)
        assert got is not None and (got.data, got.type, got.width, got.height) == (
            b"A" * 1000,
            "png",
            10,
            10,
        )
        assert db.get_shot(a, "bob", now=3) is None
        b = db.put_shot(b"B" * 1000, "jpeg", 20, 5, now=4)
        db.put_body(b"x" * 400, now=5)
        assert (db.size(), db.stats()["shots"]) == (2400, 2)
        assert db.get_shot(a, "ann", now=6) is not None  # a read makes A the newest
        c = db.put_shot(b"C" * 1000, "webp", 1, 1, now=7)
        assert db.evict() == 1  # B: the oldest (A was read since), and 2,400 bytes hold
        assert (db.size(), db.stats()["shots"], db.stats()["bodies"]) == (2400, 2, 1)
        assert db.grant_shot(b, "ann", now=8) is False  # gone: nothing to grant
        assert db.grant_shot(c, "bob", now=8) is True
        db.put_shot(b"D" * 2000, "png", 1, 1, now=9)
        assert db.evict() == 3  # the body, then A, then C: oldest first, down to 2,000
        assert (db.size(), db.stats()["shots"], db.stats()["bodies"]) == (2000, 1, 0)
        assert db.get_shot(a, "ann", now=10) is None
        assert db.get_shot(c, "bob", now=10) is None
        # The grants went with their screenshots.
        assert db._read().__enter__().execute("SELECT count(*) FROM shot_grant").fetchone() == (0,)
    finally:
        db.close()


# -- through the API -----------------------------------------------------------------------


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def upstream() -> AsyncIterator[Upstream]:
    async with Upstream(host=PUBLIC_HOST) as up:
        for i in range(6):
            up.page(f"/noise/{i}", _noise(1000 + i))
        yield up


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sift(
    tmp_path_factory: pytest.TempPathFactory, upstream: Upstream
) -> AsyncIterator[httpx.AsyncClient]:
    require_browser()
    settings = make_settings(tmp_path_factory.mktemp("bounds"), upstream_port=upstream.port)
    restricted = dataclasses.replace(settings.classes.restricted, screenshot_max_bytes=TIGHT_BYTES)
    settings = dataclasses.replace(
        settings,
        classes=dataclasses.replace(settings.classes, restricted=restricted),
        cache=CacheSettings(max_bytes=CACHE_BYTES),
    )
    async with (
        running_app(settings) as base,
        httpx.AsyncClient(base_url=base, timeout=60) as client,
    ):
        yield client


def url(upstream: Upstream, path: str) -> str:
    return f"http://{PUBLIC_NAME}:{upstream.port}{path}"


async def post(client: httpx.AsyncClient, key: str, **body: Any) -> httpx.Response:
    return await client.post("/v1/fetch", json=body, headers=auth(key))


@pytest.mark.asyncio(loop_scope="module")
async def test_an_image_over_the_byte_cap_is_shot_shorter(
    sift: httpx.AsyncClient, upstream: Upstream
) -> None:
    r = await post(sift, RESTRICTED_KEY, url=url(upstream, "/noise/0"), format="screenshot")
    assert r.status_code == 200, r.text
    env = r.json()
    shot = env["screenshot"]
    data = (await sift.get(shot["url"], headers=auth(RESTRICTED_KEY))).content
    assert len(data) == shot["bytes"] <= TIGHT_BYTES
    assert _size(data) == (1280, shot["height"])
    # Noise is ~3 bytes a pixel: 40,000 bytes hold about 10 rows of 1,280, far from 720.
    assert 1 <= shot["height"] <= 12
    assert env["warnings"] == ["screenshot_cut"]


@pytest.mark.asyncio(loop_scope="module")
async def test_an_image_that_cannot_fit_is_refused_and_the_next_works(
    sift: httpx.AsyncClient, upstream: Upstream
) -> None:
    """One row of noise 16,384 px wide is ~49 KB: no cut brings it under 40,000 bytes."""
    r = await post(
        sift,
        RESTRICTED_KEY,
        url=url(upstream, "/noise/1"),
        screenshot={"width": 16384, "height": 1},
    )
    assert r.status_code == 502, r.text
    assert r.json()["error"] == {
        "code": "too_large",
        "message": "The screenshot does not fit in 40000 bytes, the limit of your class "
        "(classes.<class>.screenshot_max_bytes).",
        "hint": "Ask for a smaller viewport, type jpeg or webp with a lower quality, or "
        "full_page false.",
    }
    r = await post(
        sift, RESTRICTED_KEY, url=url(upstream, "/noise/1"), screenshot={"width": 100, "height": 50}
    )
    assert r.status_code == 200, r.text
    assert (r.json()["screenshot"]["height"], r.json()["warnings"]) == (50, [])


@pytest.mark.asyncio(loop_scope="module")
async def test_the_cache_budget_evicts_screenshots_and_a_hit_loads_again(
    sift: httpx.AsyncClient, upstream: Upstream
) -> None:
    """Three 400x300 noise PNGs (~360 KB each) in a 1,000,000-byte cache: the first image
    is evicted; its page entry stays, so fetching it again finds the page cached but the
    image gone, and loads the page again rather than name an image nobody can get."""
    spec = {"width": 400, "height": 300}
    first = (await post(sift, FLEET_KEY, url=url(upstream, "/noise/2"), screenshot=spec)).json()
    assert first["screenshot"]["bytes"] > CACHE_BYTES // 3
    for page in ("/noise/3", "/noise/4"):
        r = await post(sift, FLEET_KEY, url=url(upstream, page), screenshot=spec)
        assert r.status_code == 200, r.text
        assert r.json()["screenshot"]["digest"] != first["screenshot"]["digest"]
    gone = await sift.get(first["screenshot"]["url"], headers=auth(FLEET_KEY))
    assert gone.status_code == 404
    again = (await post(sift, FLEET_KEY, url=url(upstream, "/noise/2"), screenshot=spec)).json()
    assert again["cache"] == "miss"
    assert upstream.hits["/noise/2"] == 2
    r = await sift.get(again["screenshot"]["url"], headers=auth(FLEET_KEY))
    assert (r.status_code, _size(r.content)) == (200, (400, 300))
    stats = (await sift.get("/v1/stats", headers=auth(FLEET_KEY))).json()
    assert stats["cache"]["bytes"] <= CACHE_BYTES


# -- sift fetch in-process (its own Chromium) ----------------------------------------------


def test_cli_in_process_writes_the_screenshot(tmp_path: Path) -> None:
    require_browser()
    page = "<html><body><h1>Seen</h1><p>A page shot by the command line.</p></body></html>"
    out = tmp_path / "shot.jpg"
    with serve_pages({"/p": (page, "text/html")}) as up:
        proc = subprocess.run(
            [
                *SIFT,
                "fetch",
                f"{up.base_url}/p",
                "--data-dir",
                str(tmp_path / "d"),
                "--no-robots",
                "--screenshot",
                str(out),
                "--full-page",
                "--viewport",
                "640x360",
                "--quality",
                "60",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "# Seen\n\nA page shot by the command line.\n"
    data = out.read_bytes()
    assert (data[:3], _size(data)) == (b"\xff\xd8\xff", (640, 360))
    assert proc.stderr == f"sift: screenshot 640x360 jpeg ({len(data)} bytes) written to {out}\n"
    bad = subprocess.run(
        [*SIFT, "fetch", "http://x.test/", "--screenshot", "a.gif"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (bad.returncode, bad.stderr) == (
        2,
        "sift fetch: --screenshot FILE must end in .png, .jpg, .jpeg or .webp\n",
    )


async def test_a_class_without_the_browser_cannot_ask_for_one(tmp_path: Path) -> None:
    """Refused before any I/O: no Chromium needed, no upstream asked."""
    settings = make_settings(tmp_path)
    restricted = dataclasses.replace(settings.classes.restricted, browser=False)
    settings = dataclasses.replace(
        settings, classes=dataclasses.replace(settings.classes, restricted=restricted)
    )
    async with running_app(settings) as base, httpx.AsyncClient(base_url=base) as client:
        r = await post(client, RESTRICTED_KEY, url="http://pub.test/", format="screenshot")
    assert (r.status_code, r.json()["error"]) == (
        422,
        {
            "code": "invalid_request",
            "message": "format: the restricted class may not use the browser, which takes "
            "screenshots",
            "hint": "Ask the operator to set classes.restricted.browser = true.",
        },
    )
