"""The page's type (article, forum, product …): features and the classifier's verdict."""

from __future__ import annotations

PAGE_FEATURES: tuple[str, ...] = ()
