"""A batch submission: validated whole before anything is stored, then stored atomically.

``parse_submission`` checks the body ``{"targets": [...], "options": {...}}`` against the
caller's class and returns the targets to store, or raises: ``RequestTooLarge`` for more
targets than the class allows, ``BadRequest`` for any bad target, listing the bad indices
and why (at most ``MAX_LISTED_PROBLEMS`` of them). Nothing is fetched or stored for a bad
submission.

Storing it is the store's ``submit_job`` (``sift.store``): the idempotency lookup, the quota
counts and the insert happen as one step, so two concurrent submissions with one key cannot
both create a job.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final

from sift.config import ClassSettings
from sift.errors import BadRequest, RequestTooLarge, SiftError
from sift.fetch.url import validate_url
from sift.options import apply_class, parse_options
from sift.principal import Principal
from sift.store.base import NewTarget

MAX_LISTED_PROBLEMS: Final = 50
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


def parse_submission(data: Any, principal: Principal, limits: ClassSettings) -> list[NewTarget]:
    """Validate a submission body for ``principal`` (class ``limits``); see the module doc."""
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
    for idx, item in enumerate(targets):
        try:
            out.append(_parse_target(item, defaults, defaults_json, principal, limits))
        except SiftError as exc:
            problems.append(f"[{idx}] {exc.message}")
    if problems:
        listed = "; ".join(problems[:MAX_LISTED_PROBLEMS])
        more = len(problems) - MAX_LISTED_PROBLEMS
        tail = f"; and {more} more" if more > 0 else ""
        raise BadRequest(
            f"{len(problems)} of {len(targets)} targets are invalid: {listed}{tail}",
            hint="Fix or remove the listed targets (by index) and submit again; "
            "nothing was stored.",
        )
    return out


def _parse_target(
    item: Any,
    defaults: Mapping[str, Any],
    defaults_json: str,
    principal: Principal,
    limits: ClassSettings,
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
    validate_url(opts.url)
    apply_class(opts, principal.caller_class, limits)
    return NewTarget(opts.url, options_json)
