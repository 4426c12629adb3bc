"""The guarded headless browser: JavaScript pages, loaded in Chromium, every connection
through sift's egress guard. See docs/browser.md.

- ``launcher``: one long-lived Chromium per process (Playwright, Debian's headless shell),
  its flags, a deny-all browser-level proxy, relaunch when it dies, optional netns.
- ``proxy``: the per-page forward proxy (HTTP + CONNECT) applying the caller's policy with
  the fetcher's own resolve-once-and-vet step.
- ``loader``: one page under one deadline, a fresh context each time.
- ``limits``: the page budgets and the open-page slots.
"""

from sift.browser.loader import Browser

__all__ = ["Browser"]
