"""A local multi-host site for crawl tests: three loopback upstreams, told apart by name.

All three listen on 127.0.1.1 (a range the test settings treat as public, so the crawling
caller may not reach private addresses); each has its own port and its own name:

- ``site.test`` (``main``): nested sections, a sitemap index (from robots.txt), robots.txt
  with ``Disallow: /private/`` and ``Crawl-delay: 2`` (by default), redirects on and off scope, a
  nofollow link, a PDF link, a link to a private address (``canary.site.test``), a trap;
- ``docs.site.test`` (``docs``): a subdomain (in ``domain`` scope);
- ``other.test`` (``other``): another domain (never in scope).

``canary.site.test`` resolves to 127.0.0.1, a loopback address the caller may not reach: a
``CanaryListener`` there must never see a connection.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from apphelpers import make_settings
from sift.config import ClassesSettings, EgressSettings, Settings
from upstream import CanaryListener, Upstream

HOST_IP = "127.0.1.1"


def _html(title: str, *links: str, extra: str = "") -> str:
    items = "".join(f'<li><a href="{h}">{h}</a></li>' for h in links)
    return (
        f"<!doctype html><html><head><title>{title}</title></head>"
        f"<body><h1>{title}</h1><p>Some text about {title}.</p><ul>{items}</ul>{extra}"
        "</body></html>"
    )


@dataclass
class Site:
    main: Upstream
    docs: Upstream
    other: Upstream
    canary: CanaryListener
    canary_port: int

    def m(self, path: str) -> str:
        return self.main.url(path, host="site.test")

    def d(self, path: str) -> str:
        return self.docs.url(path, host="docs.site.test")

    def o(self, path: str) -> str:
        return self.other.url(path, host="other.test")

    def settings(self, tmp_path: Path) -> Settings:
        """Test settings whose fleet class may not reach private addresses, with the names."""
        base = make_settings(tmp_path)
        names = {"site.test": (HOST_IP,), "docs.site.test": (HOST_IP,), "other.test": (HOST_IP,)}
        names["canary.site.test"] = ("127.0.0.1",)
        return dataclasses.replace(
            base,
            classes=ClassesSettings(),
            egress=EgressSettings(
                extra_public_cidrs=("127.0.1.0/24",), resolve=types.MappingProxyType(names)
            ),
        )


def _build(site: Site, crawl_delay_s: int) -> None:
    main, docs, other = site.main, site.docs, site.other
    canary = f"http://canary.site.test:{site.canary_port}/"
    main.page(
        "/",
        _html(
            "Home",
            "/docs/",
            "/blog/",
            "/about.html",
            "/docs/#intro",  # the same page as /docs/ once the fragment is dropped
            "/file.pdf",
            "/private/x",
            "/old",
            "/away",
            "/trap/",
            "mailto:someone@site.test",
            site.d("/"),
            site.o("/"),
            canary,
            extra='<a rel="nofollow" href="/secret/">secret</a>',
        ),
    )
    main.page("/docs/", _html("Docs", "/docs/a.html", "/docs/b.html", "/docs/sub/", "/"))
    main.page("/docs/a.html", _html("A", "/docs/b.html", "/"))
    main.page("/docs/b.html", _html("B", "/docs/a.html"))
    main.page("/docs/sub/", _html("Sub", "/docs/sub/c.html", "/docs/sub/d.html"))
    main.page("/docs/sub/c.html", _html("C"))
    main.page("/docs/sub/d.html", _html("D", "/docs/sub/deep/e.html"))
    main.page("/docs/sub/deep/e.html", _html("E"))
    main.page("/docs/hidden.html", _html("Hidden, only in the sitemap"))
    main.page("/docs/moved.html", _html("Moved"))
    main.page("/blog/", _html("Blog", "/blog/1.html", "/blog/2.html"))
    for p in ("/blog/1.html", "/blog/2.html", "/blog/3.html", "/about.html", "/secret/"):
        main.page(p, _html(p))
    main.page("/private/x", _html("Private"))
    main.page("/file.pdf", b"%PDF-1.4", content_type="application/pdf")
    main.redirect("/old", "/docs/moved.html", status=301)
    main.redirect("/away", site.o("/landing"))
    main.page(
        "/robots.txt",
        f"User-agent: *\nDisallow: /private/\nCrawl-delay: {crawl_delay_s}\n"
        f"Sitemap: {site.m('/sitemap_index.xml')}\n",
        content_type="text/plain",
    )
    ns = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
    main.page(
        "/sitemap_index.xml",
        f"<?xml version='1.0'?><sitemapindex {ns}>"
        f"<sitemap><loc>{site.m('/sitemap-docs.xml')}</loc></sitemap>"
        f"<sitemap><loc>{site.m('/sitemap-blog.xml')}</loc></sitemap>"
        f"<sitemap><loc>{site.o('/sitemap.xml')}</loc></sitemap>"  # another host: not read
        "</sitemapindex>",
        content_type="application/xml",
    )
    main.page(
        "/sitemap-docs.xml",
        f"<?xml version='1.0'?><urlset {ns}><url><loc>{site.m('/docs/hidden.html')}</loc></url>"
        f"<url><loc>{site.m('/docs/a.html')}</loc></url></urlset>",
        content_type="application/xml",
    )
    main.page(
        "/sitemap-blog.xml",
        f"<?xml version='1.0'?><urlset {ns}><url><loc>{site.m('/blog/3.html')}</loc></url>"
        "</urlset>",
        content_type="application/xml",
    )

    async def trap(request: web.Request) -> web.StreamResponse:
        # Every page links one level deeper: /trap/x/, /trap/x/x/, … for ever.
        return web.Response(text=_html(request.path, request.path + "x/"), content_type="text/html")

    main.route("/trap/", trap, prefix=True)
    docs.page("/", _html("Docs host", "/guide.html", site.m("/")))
    docs.page("/guide.html", _html("Guide"))
    other.page("/", _html("Other", "/o2.html"))
    other.page("/landing", _html("Landing", "/o2.html"))
    other.page("/o2.html", _html("O2"))
    other.page("/sitemap.xml", "<urlset/>", content_type="application/xml")


@asynccontextmanager
async def crawl_site(crawl_delay_s: int = 2) -> AsyncIterator[Site]:
    """The site; ``crawl_delay_s`` 0 leaves robots.txt without a delay (tests on real
    time)."""
    canary = CanaryListener.on(["127.0.0.1"])
    canary_port = canary._socks[0].getsockname()[1]
    try:
        async with (
            Upstream(HOST_IP) as main,
            Upstream(HOST_IP) as docs,
            Upstream(HOST_IP) as other,
        ):
            site = Site(main, docs, other, canary, canary_port)
            _build(site, crawl_delay_s)
            yield site
    finally:
        canary.close()
