"""What each MCP tool does: validate the arguments, call the core in-process, shape the result.

The tools call exactly what the HTTP API calls — ``Service.fetch`` and ``BatchJobs`` — so a
page fetched through MCP is cached for ``/v1/fetch`` and the other way round, and a batch
job submitted here is the caller's job on ``/v1/batch`` too. Nothing is fetched or
rendered a second time for the MCP front end.

Every failure becomes a tool error result (``isError``) whose text is
``<code>: <message>`` and ``hint: <hint>``, and whose ``_meta["sift/error"]`` is the same
``{code, message, hint}`` object the API answers: a model reads the text, a program parses
the object, and neither ever sees a bare protocol error for a bad URL or a refused address.
An error carries no ``structuredContent``: a tool's ``outputSchema`` describes its success
result, and clients (the TypeScript SDK, the MCP Inspector) check any structured content
against it, error or not — an error object there would fail that check and hide the error.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import mcp.types as types

from sift.batch.submit import check_idem_key
from sift.crawl.crawler import Crawler
from sift.crawl.map import map_site
from sift.crawl.spec import parse_map
from sift.crawl.submit import submit_crawl
from sift.errors import BadRequest, SiftError
from sift.jsonio import dumps, loads
from sift.mcp import watch_tools
from sift.mcp.core import Core
from sift.mcp.fetch_schema import DEFAULT_MAX_BYTES
from sift.mcp.image import image_content
from sift.mcp.job_schema import RESULTS_DEFAULT_LIMIT, RESULTS_MAX_LIMIT
from sift.mcp.schema import TOOLS, input_schema
from sift.options import MAX_INT, parse_options
from sift.principal import Principal
from sift.service import Service

log = logging.getLogger("sift.mcp")

# A batch_results page is built from at most about this many bytes of stored envelopes
# (the compact outcomes are far smaller; next_offset says where to go on).
RESULTS_READ_MAX_BYTES: Final = 8 << 20
_JOB_FIELDS: Final = (
    "id",
    "status",
    "error",
    "targets_total",
    "targets_done",
    "counts",
    "expires_at",
)
# Where an error result carries the API's error object (a prefixed ``_meta`` key, as the
# MCP spec asks of implementation-specific metadata).
ERROR_META_KEY: Final = "sift/error"
_OUTCOME_FIELDS: Final = (
    "title",
    "final_url",
    "bytes",
    "total_bytes",
    "truncated",
    "digest",
    "screenshot",
)


Handler = Callable[[Principal, dict[str, Any]], Awaitable[types.CallToolResult]]


class SiftTools:
    """The tools over a core that may appear later (the API builds it in its lifespan).

    ``default_max_bytes`` is what ``fetch`` returns when the caller does not say (lowered to
    the caller's class cap); ``clock`` gives unix seconds for the batch store.
    """

    def __init__(
        self,
        core: Callable[[], Core],
        *,
        default_max_bytes: int = DEFAULT_MAX_BYTES,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._core = core
        self._default_max_bytes = default_max_bytes
        self._clock = clock
        self._handlers: dict[str, Handler] = {
            "fetch": self.fetch,
            "batch_submit": self.batch_submit,
            "batch_status": self.batch_status,
            "batch_results": self.batch_results,
            "crawl": self.crawl,
            "map": self.map,
            "watch": self.watch,
            "watches": self.watches,
            "changes": self.changes,
        }
        assert set(self._handlers) == {t.name for t in TOOLS}

    async def call(
        self, principal: Principal, name: str, arguments: Mapping[str, Any] | None
    ) -> types.CallToolResult:
        """Run tool ``name``; every failure is returned as a tool error, never raised."""
        try:
            handler = self._handlers.get(name)
            if handler is None:
                raise BadRequest(
                    f"unknown tool {name!r}",
                    hint=f"Use one of: {', '.join(self._handlers)}.",
                )
            args = dict(arguments or {})
            _check_names(name, args)
            return await handler(principal, args)
        except SiftError as exc:
            return error_result(exc)
        except Exception as exc:
            log.error("tool %s failed unexpectedly", name, exc_info=exc)
            return error_result(SiftError("sift failed while running this tool"))

    # -- tools --------------------------------------------------------------------------

    async def fetch(self, principal: Principal, args: dict[str, Any]) -> types.CallToolResult:
        service = self._core().service
        given = dict(args)
        if args.get("max_bytes") is None:
            cap = service.settings.classes.get(principal.caller_class).output_cap
            args["max_bytes"] = min(self._default_max_bytes, cap)
        opts = parse_options(args)
        with service.inflight.hold(principal):  # the same per-caller cap as /v1/fetch
            envelope = await service.fetch(principal, opts)
        content: list[types.ContentBlock] = [
            types.TextContent(type="text", text=envelope["content"])
        ]
        tail = ""
        if "screenshot" in envelope:  # the image itself, sized for a vision model
            image, tail = await _screenshot(service, principal, envelope["screenshot"])
            content.extend(image)
        content.append(types.TextContent(type="text", text=footer(envelope, given) + tail))
        change = envelope.get("change")
        if change and change["diff"]:  # changes=true: the diff after the footer
            content.append(types.TextContent(type="text", text=change["diff"]))
        return types.CallToolResult(content=content)

    async def batch_submit(
        self, principal: Principal, args: dict[str, Any]
    ) -> types.CallToolResult:
        urls = args.get("urls")
        if not isinstance(urls, list) or not all(isinstance(u, str) for u in urls):
            raise BadRequest("urls: expected a list of URL strings")
        options = _batch_options(args.get("options"))
        idem = _idem_key(args.get("idempotency_key"), urls, options)
        body: dict[str, Any] = {"targets": urls}
        if options:
            body["options"] = options
        view, created = await self._core().jobs.submit(principal, idem, body, self._now())
        return structured_result({**compact_job(view), "created": created})

    async def batch_status(
        self, principal: Principal, args: dict[str, Any]
    ) -> types.CallToolResult:
        job_id = _job_id(args)
        view = await self._core().jobs.status(principal, job_id, self._now())
        return structured_result(compact_job(view))

    async def batch_results(
        self, principal: Principal, args: dict[str, Any]
    ) -> types.CallToolResult:
        job_id = _job_id(args)
        offset = _int_arg(args, "offset", 0, 0, MAX_INT)
        limit = _int_arg(args, "limit", RESULTS_DEFAULT_LIMIT, 1, RESULTS_MAX_LIMIT)
        jobs = self._core().jobs
        now = self._now()
        page = loads(
            await jobs.results_page(principal, job_id, offset, limit, now, RESULTS_READ_MAX_BYTES)
        )
        view = await jobs.status(principal, job_id, now)
        return structured_result(
            {
                "id": job_id,
                "status": view["status"],
                "items": [compact_outcome(item) for item in page["items"]],
                "next_offset": page["next_offset"],
            }
        )

    async def crawl(self, principal: Principal, args: dict[str, Any]) -> types.CallToolResult:
        core = self._core()
        body = {k: v for k, v in args.items() if k != "idempotency_key"}
        if "options" in body:
            body["options"] = _batch_options(body["options"])
        key = args.get("idempotency_key")
        if key is None:
            idem = "sift-mcp-crawl-" + default_idem_key([], body).removeprefix("sift-mcp-")
        else:
            idem = _idem_key(key, [], {})
        view, created = await submit_crawl(
            core.jobs, core.service, principal, idem, body, self._now()
        )
        return structured_result({**compact_job(view), "created": created})

    async def map(self, principal: Principal, args: dict[str, Any]) -> types.CallToolResult:
        core = self._core()
        spec = parse_map(args)
        with core.service.inflight.hold(principal):
            result = await map_site(
                Crawler(core.jobs.store, core.service), core.service, principal, spec
            )
        return structured_result(result)

    async def watch(self, principal: Principal, args: dict[str, Any]) -> types.CallToolResult:
        core = self._core()
        made = await watch_tools.watch(core.watches, principal, args, self._clock())
        return structured_result(made)

    async def watches(self, principal: Principal, args: dict[str, Any]) -> types.CallToolResult:
        return structured_result(await watch_tools.list_watches(self._core().watches, principal))

    async def changes(self, principal: Principal, args: dict[str, Any]) -> types.CallToolResult:
        return structured_result(await watch_tools.changes(self._core().watches, principal, args))

    def _now(self) -> int:
        return int(self._clock())


async def _screenshot(
    service: Service, principal: Principal, shot: Mapping[str, Any]
) -> tuple[list[types.ImageContent], str]:
    """The screenshot as an image block (``mcp/image.py``), and the footer line about it."""
    line = f"\nscreenshot: {shot['type']} {shot['width']}x{shot['height']}"
    stored = await service.screenshot(principal, shot["digest"])
    if stored is None:  # evicted since the fetch: rare, and said
        return [], line + " (no longer cached: fetch again)"
    block, sent = await image_content(stored.data, stored.type, stored.width, stored.height)
    if (sent.width, sent.height) != (stored.width, stored.height):
        line += f", shown scaled to {sent.width}x{sent.height}"
    return [block], line + f" | full size: GET {shot['url']}"


# -- argument checks ----------------------------------------------------------------------


def _check_names(tool: str, args: Mapping[str, Any]) -> None:
    """Refuse arguments the tool's schema does not name (a typo must not pass silently)."""
    schema = input_schema(tool) or {}
    known = schema.get("properties", {})
    unknown = sorted(set(args) - set(known))
    if unknown:
        raise BadRequest(
            f"{tool}: unknown argument {', '.join(unknown)}",
            hint=f"{tool} takes: {', '.join(known)}.",
        )


def _batch_options(value: Any) -> dict[str, Any]:
    """batch_submit's ``options`` as its schema says: only the options it names (a fleet
    option such as ``robots`` or a fetch-only one such as ``offset`` is refused here, not
    passed on to the job), each with a valid value."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadRequest("options: expected an object of fetch options")
    schema = input_schema("batch_submit") or {}
    known = schema["properties"]["options"]["properties"]
    unknown = sorted(set(value) - set(known))
    if unknown:
        raise BadRequest(
            f"options: unknown option {', '.join(unknown)}",
            hint=f"batch_submit options take: {', '.join(known)}.",
        )
    try:
        parse_options(value, require_url=False)
    except BadRequest as exc:
        raise BadRequest(
            f"options: {exc.message.removeprefix('invalid options: ')}",
            hint="Fix the option as the message says (batch_submit's schema gives each "
            "option's type and range) and submit again.",
        ) from exc
    return value


def _job_id(args: Mapping[str, Any]) -> str:
    job_id = args.get("id")
    if not isinstance(job_id, str) or not job_id:
        raise BadRequest("id: expected the job id batch_submit returned")
    return job_id


def _int_arg(args: Mapping[str, Any], name: str, default: int, lo: int, hi: int) -> int:
    value = args.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise BadRequest(f"{name}: expected an integer from {lo} to {hi}")
    return value


def _idem_key(key: Any, urls: list[str], options: Mapping[str, Any]) -> str:
    if key is None:
        return default_idem_key(urls, options)
    try:
        return check_idem_key(key if isinstance(key, str) else None)
    except BadRequest as exc:
        raise BadRequest(
            "idempotency_key: expected 1-255 printable ASCII characters",
            hint="Pass a short printable key such as a UUID, or omit it.",
        ) from exc


def default_idem_key(urls: list[str], options: Mapping[str, Any]) -> str:
    """The same list with the same options → the same key → the same job while it lives."""
    blob = json.dumps([urls, options], sort_keys=True, separators=(",", ":"))
    return "sift-mcp-" + hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()[:40]


# -- results ------------------------------------------------------------------------------


def error_result(exc: SiftError) -> types.CallToolResult:
    """A tool error carrying ``code``, ``message`` and ``hint`` (and Retry-After, if any) as
    text and as ``_meta[ERROR_META_KEY]``; never as structured content (see the module
    docstring)."""
    body: dict[str, Any] = exc.to_dict()["error"]
    text = f"{exc.code}: {exc.message}\nhint: {exc.hint}"
    retry_after = exc.headers.get("Retry-After")
    if retry_after is not None:
        body["retry_after"] = int(retry_after) if retry_after.isdigit() else retry_after
        text += f"\nretry after: {retry_after} s"
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        is_error=True,
        _meta={ERROR_META_KEY: body},
    )


def structured_result(data: dict[str, Any]) -> types.CallToolResult:
    """Structured content, and the same JSON as text for clients that only show text."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=dumps(data).decode())],
        structured_content=data,
    )


def footer(envelope: Mapping[str, Any], args: Mapping[str, Any]) -> str:
    """The lines a model acts on after the content: what it read and how to read on."""
    start = envelope["offset"]
    end = start + envelope["bytes"]
    truncated = envelope["truncated"]
    # The title is already cut to the cap (render/extras.py); one line, so a title cannot
    # add footer lines of its own.
    title = " ".join((envelope["title"] or "").split()) or "(none)"
    lines = [
        "---",
        f"title: {title}",
        f"final_url: {envelope['final_url']}",
        f"status: {envelope['status']} | {envelope['content_type']} | cache {envelope['cache']}"
        + (" | engine browser" if envelope.get("engine") == "browser" else ""),
        *_page_line(envelope),
        f"bytes: {start}-{end} of {envelope['total_bytes']} | "
        f"truncated: {'yes' if truncated else 'no'}",
    ]
    if envelope.get("actions"):
        lines.append("actions: " + ", ".join(_step_note(o) for o in envelope["actions"]))
    if envelope.get("change"):
        lines.append(_change_line(envelope["change"]))
    if truncated:
        call = _read_on_call(envelope, args)
        lines.append(f"to read on, call {call}")
    else:
        lines.append(f"digest: {envelope['digest']}")
    if envelope.get("warnings"):
        lines.append(f"warnings: {', '.join(envelope['warnings'])}")
    return "\n".join(lines)


def _change_line(change: Mapping[str, Any]) -> str:
    """``change: changed +2 -1 | previous 1700000000 (digest sha256:…)`` for changes=true."""
    line = f"change: {change['status']}"
    if change["status"] == "changed":
        line += f" +{change['added']} -{change['removed']}"
        if change["truncated"]:
            line += " (diff truncated)"
    if change["previous_fetched_at"] is not None:
        line += f" | previous {change['previous_fetched_at']} ({change['previous_digest']})"
    return line


def _step_note(outcome: Mapping[str, Any]) -> str:
    """``click ok``, or ``click ok (1 download refused)``, for the footer's actions line."""
    note = f"{outcome['action']} ok"
    refused = outcome.get("downloads_refused")
    return note + (f" ({refused} download{'s' * (refused > 1)} refused)" if refused else "")


def _page_line(envelope: Mapping[str, Any]) -> list[str]:
    """``page: article | published … | by …`` for an HTML page (one line, bounded values)."""
    kind = envelope.get("page_type")
    if not kind:
        return []
    meta = envelope.get("metadata") or {}
    parts = [f"page: {kind}"]
    for key, label in (("published", "published "), ("author", "by ")):
        value = " ".join(str(meta.get(key) or "").split())[:120]
        if value:
            parts.append(label + value)
    if kind == "other" and len(parts) == 1:
        return []  # nothing to tell the agent
    return [" | ".join(parts)]


def _read_on_call(envelope: Mapping[str, Any], args: Mapping[str, Any]) -> str:
    """The exact fetch call continuing this snapshot: the arguments the caller gave (render
    options, max_bytes), the next offset and the digest."""
    parts = [f"url={json.dumps(envelope['url'])}"]
    if args.get("format", "markdown") != "markdown":
        parts.append(f"format={json.dumps(args['format'])}")
    if args.get("main_content") is False:
        parts.append("main_content=false")
    if args.get("selector") is not None:
        parts.append(f"selector={json.dumps(args['selector'])}")
    if args.get("max_bytes") is not None:
        parts.append(f"max_bytes={args['max_bytes']}")
    if envelope.get("engine") == "browser" and args.get("engine") == "browser":
        parts.append('engine="browser"')
    if args.get("wait_for") is not None:
        parts.append(f"wait_for={json.dumps(args['wait_for'])}")
    for secret in ("headers", "cookies"):  # private pages: named, never their values
        if args.get(secret):
            parts.append(f"{secret}=<the same {secret} as this call>")
    if args.get("actions"):  # the page key includes them: the same steps read the same page
        parts.append(f"actions={json.dumps(args['actions'], ensure_ascii=False)}")
    if args.get("screenshot") is not None:  # part of the snapshot's key
        parts.append(f"screenshot={json.dumps(args['screenshot'], separators=(',', ':'))}")
    parts.append(f"offset={envelope['next_offset']}")
    parts.append(f"digest={json.dumps(envelope['digest'])}")
    return f"fetch({', '.join(parts)})"


def compact_job(view: Mapping[str, Any]) -> dict[str, Any]:
    return {k: view[k] for k in _JOB_FIELDS if k in view}


def compact_outcome(item: Mapping[str, Any]) -> dict[str, Any]:
    """One target without its content: enough to decide what to read or retry."""
    out: dict[str, Any] = {"idx": item["idx"], "url": item["url"], "status": item["status"]}
    if "depth" in item:  # a crawl's page
        out["depth"], out["parent"] = item["depth"], item["parent"]
    result = item.get("result")
    if isinstance(result, dict):
        out["http_status"] = result["status"]
        out.update({k: result[k] for k in _OUTCOME_FIELDS if k in result})
        if result.get("change"):  # changes=true: its status (the diff is in the result)
            out["change"] = result["change"]["status"]
    if "error" in item:
        out["error"] = item["error"]
    return out
