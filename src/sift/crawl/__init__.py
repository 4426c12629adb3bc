"""Crawl and map a site (docs/crawl.md).

A crawl is a batch job of kind ``crawl`` that grows: the batch runner fetches its targets
like any others (same slots, politeness, cache), and after each HTML page it calls
``Crawler.after_page``, which finds the page's links (and, for the start page, the site's
sitemaps), keeps those in scope and appends them to the job in the store.

- ``spec``: the request bodies of ``/v1/crawl`` and ``/v1/map``, validated whole;
- ``globs``: include/exclude path globs;
- ``scope``: host, domain or prefix, judged on normalised URLs;
- ``trap``: repeated-path patterns (links that grow their path);
- ``links``: the links of an HTML page (nofollow and non-HTML links left out);
- ``sitemap``: sitemaps, sitemap indexes and robots.txt ``Sitemap:`` lines;
- ``frontier``: the filter every discovered URL passes before it is enqueued;
- ``crawler``: the runner's hook; ``submit``: starting a crawl; ``map``: ``/v1/map``.
"""
