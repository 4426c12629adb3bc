"""The exit statuses of the ``sift`` commands."""

from __future__ import annotations

from typing import Final

EXIT_OK: Final = 0
# A job with a failed target, or a sift error with its hint.
EXIT_FAILED: Final = 1
# Bad usage, configuration or path (also EXIT_CONFIG: the same status, said two ways).
EXIT_USAGE: Final = 2
EXIT_CONFIG: Final = 2
# `sift fetch`: the page was fetched, but the upstream answered 4xx or 5xx.
EXIT_UPSTREAM_STATUS: Final = 3
# Ctrl-C (a running job is cancelled first).
EXIT_INTERRUPTED: Final = 130
