"""``/v1/batch``: submit, list, status, results (paged or NDJSON), cancel.

Thin handlers over ``sift.batch.jobs.BatchJobs`` (``app.state.batch``): authenticate, read
the clock, translate HTTP to arguments. Another caller's job answers 404 exactly as a
missing one on every route; errors are raised as ``SiftError`` and rendered by the one
handler in ``api/errors.py``.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Final

from fastapi import FastAPI, Query, Request
from fastapi.responses import Response, StreamingResponse

from sift.api.auth import authenticate
from sift.api.batch_schema import (
    BatchJobList,
    BatchJobView,
    BatchResultsPage,
    idempotency_parameter,
    submit_request_body,
)
from sift.api.fetch_routes import read_json
from sift.api.schema import ERROR_RESPONSES, keyed
from sift.assembly.runner import make_runner
from sift.batch.jobs import MAX_LIST_LIMIT, MAX_PAGE_LIMIT, BatchJobs
from sift.batch.runner import Runner, reconcile
from sift.batch.submit import check_idem_key
from sift.config import Settings
from sift.jsonio import dumps
from sift.options import MAX_INT
from sift.principal import OPERATOR, Principal
from sift.service import Service
from sift.store import BatchStore

log = logging.getLogger("sift.api")

# A results page stops adding targets past this many bytes of JSON (at least one is
# always sent): a page of 1,000 capped envelopes could otherwise reach a gigabyte.
RESULTS_PAGE_MAX_BYTES: Final = 16 << 20
NDJSON: Final = "application/x-ndjson"


def _caller(request: Request) -> tuple[BatchJobs, Principal, int]:
    principal = authenticate(request.app.state.keys, request.headers.get("authorization"))
    return request.app.state.batch, principal, int(time.time())


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(dumps(body), status_code=status, headers=headers, media_type="application/json")


# The handlers' names are part of the OpenAPI document: FastAPI derives each operationId
# from its handler's name.
async def submit(request: Request) -> Response:
    jobs, principal, now = _caller(request)
    idem_key = check_idem_key(request.headers.get("idempotency-key"))
    settings = request.app.state.settings
    max_targets = settings.classes.get(principal.caller_class).max_targets
    body = await read_json(request, settings.batch.request_max_bytes(max_targets))
    view, created = await jobs.submit(principal, idem_key, body, now)
    if created:
        return _json(view, 202, {"Location": f"/v1/batch/{view['id']}"})
    return _json(view)


async def list_jobs(
    request: Request,
    limit: int = Query(50, ge=1, le=MAX_LIST_LIMIT, description="Jobs to return."),
) -> Response:
    jobs, principal, _ = _caller(request)
    return _json({"items": await jobs.list(principal, limit)})


async def status(request: Request, job_id: str) -> Response:
    jobs, principal, now = _caller(request)
    return _json(await jobs.status(principal, job_id, now))


async def results(
    request: Request,
    job_id: str,
    offset: int = Query(0, ge=0, le=MAX_INT, description="First idx to return."),
    limit: int = Query(100, ge=1, le=MAX_PAGE_LIMIT, description="Targets per page."),
) -> Response:
    jobs, principal, now = _caller(request)
    page = await jobs.results_page(principal, job_id, offset, limit, now, RESULTS_PAGE_MAX_BYTES)
    return Response(page, media_type="application/json")


async def results_ndjson(request: Request, job_id: str) -> Response:
    jobs, principal, now = _caller(request)
    await jobs.check_owner(principal, job_id, now)
    return StreamingResponse(jobs.results_ndjson(principal, job_id, now), media_type=NDJSON)


async def cancel(request: Request, job_id: str) -> Response:
    jobs, principal, now = _caller(request)
    return _json(await jobs.cancel(principal, job_id, now))


def install_batch_routes(app: FastAPI) -> None:
    """Register the /v1/batch routes on ``app``, in the order the OpenAPI document lists them."""
    errors: dict[int | str, dict[str, Any]] = dict(ERROR_RESPONSES)
    view: dict[int | str, dict[str, Any]] = {200: {"model": BatchJobView}, **errors}
    common: dict[str, Any] = {"tags": ["batch"], "response_model": None, "openapi_extra": keyed()}
    app.add_api_route(
        "/v1/batch",
        submit,
        methods=["POST"],
        summary="Submit a batch of URLs (idempotent per Idempotency-Key)",
        status_code=202,
        responses={
            202: {"model": BatchJobView, "description": "Job created"},
            200: {"model": BatchJobView, "description": "The live job with this key"},
            **errors,
        },
        **{
            **common,
            "openapi_extra": {
                **keyed(),
                "requestBody": submit_request_body(),
                "parameters": idempotency_parameter(),
            },
        },
    )
    app.add_api_route(
        "/v1/batch",
        list_jobs,
        methods=["GET"],
        summary="The caller's newest jobs, newest first (leases are not extended)",
        responses={200: {"model": BatchJobList}, **errors},
        **common,
    )
    app.add_api_route(
        "/v1/batch/{job_id}",
        status,
        methods=["GET"],
        summary="A job's status and counts",
        responses=view,
        **common,
    )
    app.add_api_route(
        "/v1/batch/{job_id}/results",
        results,
        methods=["GET"],
        summary="A page of a job's targets with their envelopes or errors, in order",
        responses={200: {"model": BatchResultsPage}, **errors},
        **common,
    )
    app.add_api_route(
        "/v1/batch/{job_id}/results.ndjson",
        results_ndjson,
        methods=["GET"],
        summary="Every finished target, one JSON object per line",
        response_class=StreamingResponse,
        responses={
            200: {"content": {NDJSON: {"schema": {"type": "string"}}}},
            **errors,
        },
        **common,
    )
    app.add_api_route(
        "/v1/batch/{job_id}",
        cancel,
        methods=["DELETE"],
        summary="Cancel a job (a finished job is left as it is)",
        responses=view,
        **common,
    )


async def start_batch(
    app: FastAPI, settings: Settings, store: BatchStore, service: Service
) -> Runner:
    """Lifespan start-up for batch: reconcile what a previous run left in flight (before the
    runner starts; only for a store no other node shares), then start the runner and publish
    ``app.state.batch``."""
    if not store.shared:
        failed = await reconcile(store, int(time.time()))
        if failed:
            log.warning("marked %d batch jobs interrupted by the last shutdown as failed", failed)
    # Jobs the local operator submits through the server run as the operator, as in-process.
    runner = make_runner(settings, store, service, principals={OPERATOR.name: OPERATOR})
    app.state.batch = BatchJobs(settings, store, runner)
    runner.start()
    return runner
