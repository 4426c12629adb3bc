"""A watch as a caller creates it: ``POST /v1/watches`` (and the MCP ``watch`` tool) body,
validated whole before anything is stored.

``{"url": ..., "every": 3600 | "1h", "options": {fetch options}, "ignore": [CSS selectors],
"webhook": "https://..."}``. Refused: an interval below the class's ``min_interval_s``; a
URL, or a webhook URL, the caller's egress policy refuses before any DNS lookup (the check a
batch submission runs on its targets, ``batch.submit.egress_check``; names that need DNS are
judged when fetched, and the webhook again at every delivery); fetch options the class may
not use; options a watch sets itself (``changes``, ``tag``, ``max_age_s``, ``ignore``) and
credentials (``headers``, ``cookies``: a watch is stored for good, a caller's secrets are not).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Final

from sift.batch.submit import UrlCheck, refused_entry
from sift.config import ClassSettings
from sift.errors import BadRequest, Blocked
from sift.fetch.url import validate_url
from sift.options import apply_class, parse_options
from sift.principal import Principal
from sift.webhooks.signing import new_secret

# The longest interval a watch may have: a year and a day.
MAX_EVERY_S: Final = 366 * 86400.0
_BODY_KEYS: Final = frozenset({"url", "every", "options", "ignore", "webhook"})
# Options a watch sets on every check itself, and credentials it never stores.
_OWN_OPTIONS: Final = frozenset({"changes", "tag", "max_age_s", "ignore", "url"})
_SECRET_OPTIONS: Final = frozenset({"headers", "cookies"})
_EVERY_RE: Final = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(s|m|h|d)?\s*")
_UNIT_S: Final = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
# Whether this sift's fetch options carry change tracking (docs/watches.md "What changed").


@dataclass(frozen=True, slots=True)
class WatchSpec:
    """A validated creation: what the watch row stores."""

    url: str
    every_s: float
    options: str  # JSON, sorted keys
    ignore: tuple[str, ...]
    webhook: str  # "" when none


def new_webhook_secret() -> str:
    """A per-watch signing secret in the Standard Webhooks form ``whsec_<base64>``."""
    return new_secret()


def parse_every(value: Any, min_s: float) -> float:
    """``every``: seconds (a number) or ``"90s"``, ``"15m"``, ``"2h"``, ``"1d"``; at least
    ``min_s`` (the caller's class) and at most a year."""
    hint = f'Send every as seconds or "30m", "2h", "1d": at least {_human(min_s)} for your class.'
    seconds: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str) and (m := _EVERY_RE.fullmatch(value)):
        seconds = float(m.group(1)) * _UNIT_S[m.group(2) or "s"]
    if seconds is None or seconds != seconds:  # NaN
        raise BadRequest('every: expected seconds or a duration such as "30m"', hint=hint)
    if seconds < min_s:
        raise BadRequest(
            f"every: {_human(seconds)} is shorter than this caller's minimum interval "
            f"of {_human(min_s)}",
            hint=hint,
        )
    if seconds > MAX_EVERY_S:
        raise BadRequest(f"every: at most {_human(MAX_EVERY_S)}", hint=hint)
    return seconds


def _human(seconds: float) -> str:
    return f"{seconds:g} s"


def parse_watch(
    data: Any, principal: Principal, limits: ClassSettings, check: UrlCheck | None = None
) -> WatchSpec:
    """Validate a creation body for ``principal`` (see the module docstring). ``check``
    (``batch.submit.egress_check``) refuses URLs the caller's policy refuses without DNS."""
    if not isinstance(data, dict):
        raise BadRequest(
            "request body must be a JSON object",
            hint='Send {"url": "https://…", "every": "1h"}.',
        )
    unknown = sorted(set(data) - _BODY_KEYS)
    if unknown:
        raise BadRequest(
            f"unknown field {', '.join(unknown)} (known: {', '.join(sorted(_BODY_KEYS))})"
        )
    every_s = parse_every(data.get("every"), limits.min_interval_s)
    options = _options(data.get("options"))
    ignore = _ignore(data.get("ignore"))
    opts = parse_options({**options, "url": data.get("url")})
    _check_url(opts.url, check, "url")
    apply_class(opts, principal.caller_class, limits)
    webhook = data.get("webhook") or ""
    if not isinstance(webhook, str):
        raise BadRequest("webhook: expected an http(s) URL")
    if webhook:
        _check_url(webhook, check, "webhook")
    text = json.dumps(options, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return WatchSpec(opts.url, every_s, text, ignore, webhook)


def _options(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadRequest("options: expected an object of fetch options")
    own = sorted(set(value) & _OWN_OPTIONS)
    if own:
        raise BadRequest(
            f"options: {', '.join(own)} cannot be set on a watch",
            hint="A watch's checks always fetch fresh (max_age_s 0) with change tracking; "
            "url and ignore go beside options.",
        )
    secret = sorted(set(value) & _SECRET_OPTIONS)
    if secret:
        raise BadRequest(
            f"options: {', '.join(secret)} cannot be stored in a watch",
            hint="A watch is kept until deleted; sift does not keep a caller's credentials.",
        )
    return dict(value)


def _ignore(value: Any) -> tuple[str, ...]:
    """``ignore``: CSS selectors dropped before comparing, under the limits of ``exclude``."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise BadRequest("ignore: expected a list of CSS selectors")
    try:
        parse_options({"exclude": value}, require_url=False)
    except BadRequest as exc:
        raise BadRequest(exc.message.replace("exclude", "ignore"), hint=exc.hint) from exc
    return tuple(value)


def _check_url(url: str, check: UrlCheck | None, name: str) -> None:
    try:
        if check is None:
            validate_url(url)
        else:
            check(url)
    except Blocked as exc:
        raise Blocked(
            f"{name}: refused before any fetch: {refused_entry(url)}", hint=exc.hint
        ) from exc
    except BadRequest as exc:
        raise type(exc)(f"{name}: {exc.message}", hint=exc.hint) from exc  # its own code
