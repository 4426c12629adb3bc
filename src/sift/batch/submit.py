"""A batch submission: validated whole before anything is stored, then stored atomically.

``parse_submission`` checks the body ``{"targets": [...], "options": {...}}`` against the
caller's class and returns the targets to store, or raises: ``RequestTooLarge`` for more
targets than the class allows, ``BadRequest`` for any bad target, listing the bad indices
and why (at most ``MAX_LISTED_PROBLEMS`` of them). Nothing is fetched or stored for a bad
submission.

Refused early: a target the caller's egress policy refuses before any DNS lookup (an IP
literal in a range the policy may not reach, however it is spelled — ``127.1``,
``2130706433``, ``0x7f.0.0.1``, ``[::ffff:127.0.0.1]`` —, a port it may not use, a local
name, a name ``[egress.resolve]`` maps to such an address) is such a bad target: every fetch
of it would be refused, so the job is not stored to fail target by target. The decision is
the fetcher's own (``Fetcher.check_without_dns``, which applies ``fetch.egress``), handed in
as ``check`` by ``egress_check``; names that need DNS are judged when fetched, as before.

Storing it is the store's ``submit_job`` (``sift.store``): the idempotency lookup, the quota
counts and the insert happen as one step, so two concurrent submissions with one key cannot
both create a job.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from sift.config import ClassSettings
from sift.errors import BadRequest, Blocked, RequestTooLarge, SiftError
from sift.fetch import Target
from sift.fetch.url import validate_url
from sift.options import apply_class, parse_options
from sift.principal import Principal
from sift.store.base import NewTarget

if TYPE_CHECKING:
    from sift.service import Service

MAX_LISTED_PROBLEMS: Final = 50
# How much of a refused URL a refusal quotes (a URL may be 8 KiB long).
MAX_QUOTED_URL_CHARS: Final = 200
REFUSED_WHY: Final = (
    "blocked_address (its host, address or port is outside this caller's egress policy)"
)
# A check that raises for a URL the caller's policy refuses without DNS (see egress_check).
UrlCheck = Callable[[str], Target]
MAX_IDEM_KEY_CHARS: Final = 255
# Printable ASCII (space included, but not at either end: HTTP trims header values).
_IDEM_KEY_RE: Final = re.compile(r"[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?")
# Retry-After sent with a quota refusal: a hint for well-behaved clients, not a promise.
_BODY_KEYS: Final = frozenset({"targets", "options"})
_TARGET_KEYS: Final = frozenset({"url", "options"})


def check_idem_key(value: str | None) -> str:
    """The ``Idempotency-Key`` header value, or ``BadRequest``: required, 1–255 printable
    ASCII characters."""
    hint = "Send an Idempotency-Key header: 1-255 printable ASCII characters, e.g. a UUID."
    if value is None or not value.strip():
        raise BadRequest("the Idempotency-Key header is required for POST /v1/batch", hint=hint)
    value = value.strip()
    if len(value) > MAX_IDEM_KEY_CHARS or not _IDEM_KEY_RE.fullmatch(value):
        raise BadRequest(
            f"Idempotency-Key must be 1-{MAX_IDEM_KEY_CHARS} printable ASCII characters",
            hint=hint,
        )
    return value


def _options_json(options: Mapping[str, Any]) -> str:
    return json.dumps(options, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def egress_check(service: Service, principal: Principal) -> UrlCheck:
    """The check a submission of ``principal`` runs on each URL: the fetcher's refusals
    without DNS under the policy a fetch of theirs would run under (``Blocked``)."""
    limits = service.settings.classes.get(principal.caller_class)
    policy = service.policy_for(principal, limits.timeout_s)
    fetcher = service.fetcher
    return lambda url: fetcher.check_without_dns(url, policy)


def refused_entry(url: str) -> str:
    """How a refusal lists one URL the policy refuses: the URL (cut) and why."""
    shown = url if len(url) <= MAX_QUOTED_URL_CHARS else url[:MAX_QUOTED_URL_CHARS] + "…"
    return f"{shown}: {REFUSED_WHY}"


def parse_submission(
    data: Any, principal: Principal, limits: ClassSettings, check: UrlCheck | None = None
) -> list[NewTarget]:
    """Validate a submission body for ``principal`` (class ``limits``); see the module doc.
    ``check`` (``egress_check``) refuses the URLs the caller's policy refuses without DNS;
    without it only the URL rules apply."""
    if not isinstance(data, dict):
        raise BadRequest(
            "request body must be a JSON object",
            hint='Send {"targets": ["https://…", {"url": "https://…", "options": {…}}]}.',
        )
    unknown = sorted(set(data) - _BODY_KEYS)
    if unknown:
        raise BadRequest(f"unknown field {', '.join(unknown)} (known: options, targets)")
    targets = data.get("targets")
    if not isinstance(targets, list) or not targets:
        raise BadRequest(
            "targets: expected a non-empty list of URLs or {url, options} objects",
            hint='Send {"targets": ["https://example.com/"]}.',
        )
    if len(targets) > limits.max_targets:
        raise RequestTooLarge(
            f"{len(targets)} targets exceed this caller's limit of {limits.max_targets} per job",
            hint=f"Split the list into jobs of at most {limits.max_targets} targets.",
        )
    defaults = data.get("options", {})
    if defaults is None:
        defaults = {}
    if not isinstance(defaults, dict):
        raise BadRequest("options: expected an object of fetch options for every target")
    if "url" in defaults:
        raise BadRequest("options: url is set per target, not in the default options")
    try:
        parse_options(defaults, require_url=False)
    except BadRequest as exc:
        raise BadRequest(f"default {exc.message}") from exc
    defaults_json = _options_json(defaults)
    out: list[NewTarget] = []
    problems: list[str] = []
    refused: Blocked | None = None
    for idx, item in enumerate(targets):
        try:
            out.append(_parse_target(item, defaults, defaults_json, principal, limits, check))
        except _Refused as exc:
            refused = exc.blocked
            problems.append(f"[{idx}] {refused_entry(exc.url)}")
        except SiftError as exc:
            problems.append(f"[{idx}] {exc.message}")
    if problems:
        raise _bad_targets(problems, len(targets), refused)
    return out


class _Refused(Exception):
    """A target the egress check refused (carried out of ``_parse_target`` with its URL)."""

    def __init__(self, url: str, blocked: Blocked) -> None:
        super().__init__(url)
        self.url = url
        self.blocked = blocked


def _bad_targets(problems: list[str], total: int, refused: Blocked | None) -> BadRequest:
    listed = "; ".join(problems[:MAX_LISTED_PROBLEMS])
    more = len(problems) - MAX_LISTED_PROBLEMS
    tail = f"; and {more} more" if more > 0 else ""
    if refused is None:
        return BadRequest(
            f"{len(problems)} of {total} targets are invalid: {listed}{tail}",
            hint="Fix or remove the listed targets (by index) and submit again; "
            "nothing was stored.",
        )
    return BadRequest(
        f"{len(problems)} of {total} targets are refused before any fetch: {listed}{tail}",
        hint=f"{refused.hint} Remove or fix the listed targets (by index) and submit again; "
        "nothing was stored.",
    )


def _parse_target(
    item: Any,
    defaults: Mapping[str, Any],
    defaults_json: str,
    principal: Principal,
    limits: ClassSettings,
    check: UrlCheck | None,
) -> NewTarget:
    if isinstance(item, str):
        merged, options_json = {**defaults, "url": item}, defaults_json
    elif isinstance(item, dict):
        unknown = sorted(set(item) - _TARGET_KEYS)
        if unknown:
            raise BadRequest(f"unknown field {', '.join(unknown)} (known: options, url)")
        own = item.get("options")
        if own is None:
            own = {}
        if not isinstance(own, dict):
            raise BadRequest("options: expected an object")
        if "url" in own:
            raise BadRequest("options: url belongs beside options, not inside")
        options = {**defaults, **own}
        merged = {**options, "url": item.get("url")}
        options_json = _options_json(options) if own else defaults_json
    else:
        raise BadRequest("expected a URL string or an object {url, options}")
    opts = parse_options(merged)
    if check is None:
        validate_url(opts.url)
    else:
        try:
            check(opts.url)
        except Blocked as exc:
            raise _Refused(opts.url, exc) from exc
    apply_class(opts, principal.caller_class, limits)
    return NewTarget(opts.url, options_json)
