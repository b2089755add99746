"""Errors of the console's API as JSON: ``{"error": {"type": ..., "message": ...}}`` with the HTTP status that
says whose fault it was. A request that fails changes nothing: every handler checks its input before it asks a
broker to change anything."""

from __future__ import annotations

import logging

from aiohttp import web

from pocketmq.common.errors import (
    AccessDeniedError,
    BadRequestError,
    ClientError,
    ConfigError,
    NoPermissionError,
    PocketMQError,
    RemotingError,
    ServiceNotAvailableError,
    SubscriptionGroupNotExistError,
    TopicNotExistError,
)
from pocketmq.ops.message_query import MessageNotFoundError
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.error_codes import RemoteServerError

log = logging.getLogger(__name__)

# A broker's refusal (a remoting reply's code) as the HTTP status that says the same.
RESPONSE_STATUS: dict[int, int] = {
    ResponseCode.TOPIC_NOT_EXIST: 404,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: 404,
    ResponseCode.INVALID_PARAMETER: 400,
}

# What the brokers say when a request was not authenticated (the rest of their refusals: not allowed).
UNAUTHENTICATED_MARKS = ("username cannot be null", "is not found.", "is disabled.", "check signature failed")
REALM_HEADER = {"WWW-Authenticate": 'Basic realm="PocketMQ console", charset="UTF-8"'}


class NotFound(PocketMQError):
    """What the request names does not exist (a message, a dead letter, a broker)."""


class Unauthenticated(PocketMQError):
    """The console needs credentials and the request has none, or they do not parse."""


def is_access_refusal(exc: BaseException) -> bool:
    """Refused by the brokers' access control (or a permission): as a typed error or a reply's code."""
    if isinstance(exc, RemoteServerError):
        return exc.response_code == ResponseCode.NO_PERMISSION
    return isinstance(exc, AccessDeniedError | NoPermissionError)


def is_unauthenticated(exc: BaseException) -> bool:
    """A broker's refusal that says the request was not authenticated (rather than not allowed)."""
    return is_access_refusal(exc) and any(mark in str(exc) for mark in UNAUTHENTICATED_MARKS)


def status_of(exc: Exception) -> int:
    if isinstance(exc, Unauthenticated):
        return 401
    if is_access_refusal(exc):
        return 401 if is_unauthenticated(exc) else 403
    if isinstance(exc, RemoteServerError):
        return RESPONSE_STATUS.get(exc.response_code, 502)
    if isinstance(exc, TopicNotExistError | SubscriptionGroupNotExistError | NotFound | MessageNotFoundError):
        return 404
    if isinstance(exc, BadRequestError | ConfigError | ValueError):
        return 400
    if isinstance(exc, RemotingError | ServiceNotAvailableError | ConnectionError | TimeoutError):
        return 502  # a broker or the name server did not answer
    if isinstance(exc, ClientError):
        return 409  # the cluster's state does not allow it (no master registered ...)
    return 500


def json_error(status: int, kind: str, message: str) -> web.Response:
    headers = REALM_HEADER if status == 401 else None
    return web.json_response({"error": {"type": kind, "message": message}}, status=status, headers=headers)


@web.middleware
async def api_errors(request: web.Request, handler) -> web.StreamResponse:
    """An exception in an API handler as a JSON error; aiohttp's own (404 route, 405 method) as JSON too."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if not request.path.startswith("/api/") or exc.status < 400:
            raise
        return json_error(exc.status, exc.reason.lower().replace(" ", "_"), exc.text or exc.reason)
    except Exception as exc:  # answered as JSON: a script must never get an HTML traceback
        status = status_of(exc)
        if status == 500:
            log.exception("event=console_request_failed path=%s", request.path)
        message = str(exc) or type(exc).__name__
        if request.path.startswith("/api/"):
            return json_error(status, type(exc).__name__, message)
        return web.Response(status=status, text=message, headers=REALM_HEADER if status == 401 else None)
