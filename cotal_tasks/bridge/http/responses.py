"""JSON answers and the one error shape: ``{"error": {"code", "message"}}``, with the
HTTP status the catalog code maps to."""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

from cotal_tasks.core import ContractError, ErrorCode

STATUS_OF: dict[ErrorCode, int] = {
    ErrorCode.UNAUTHENTICATED: 401,
    ErrorCode.PERMISSION_DENIED: 403,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.ALREADY_EXISTS: 409,
    ErrorCode.CONFLICT: 409,
    ErrorCode.EXPIRED: 410,
    ErrorCode.RESOURCE_EXHAUSTED: 429,
    ErrorCode.INTERNAL: 500,
    ErrorCode.UNIMPLEMENTED: 501,
    ErrorCode.UNAVAILABLE: 503,
    ErrorCode.CANCELLED: 503,
    ErrorCode.DEADLINE_EXCEEDED: 504,
}  # every other code is the caller's input: 400
NO_STORE = {"Cache-Control": "no-store"}


def json_answer(data: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(data, status_code=status, headers=NO_STORE)


def status_of(code: ErrorCode) -> int:
    return STATUS_OF.get(code, 400)


def error_answer(exc: ContractError) -> JSONResponse:
    headers = dict(NO_STORE)
    if exc.code is ErrorCode.UNAUTHENTICATED:
        headers["WWW-Authenticate"] = 'Bearer realm="cotal-tasks"'
    if exc.code in (ErrorCode.UNAVAILABLE, ErrorCode.RESOURCE_EXHAUSTED):
        headers["Retry-After"] = "5"
    body = {"error": {"code": exc.code.value, "message": exc.message}}
    return JSONResponse(body, status_code=status_of(exc.code), headers=headers)
