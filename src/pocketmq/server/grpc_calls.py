"""What every v2 RPC handler does around its work, for the embedded front end and the proxy alike: reading the
client's headers, refusing undecodable requests, and turning a failure into the request's own response.

- ``guard(rpc, work, on_error)``: a ``PocketMQError`` becomes its ``v2_code``; anything else is logged and
  answered INTERNAL_SERVER_ERROR (its text is not sent). One request's failure never ends another.
- ``abort_malformed``: bytes that are not the method's protobuf (``Malformed``, protocol/grpc_service.py) get
  gRPC INVALID_ARGUMENT.
"""

from __future__ import annotations

import logging

import grpc

from pocketmq.common.errors import PocketMQError
from pocketmq.protocol import grpc_codec as codec
from pocketmq.protocol.codes import V2StatusCode
from pocketmq.protocol.error_codes import V2StatusError, v2_code_of
from pocketmq.protocol.grpc_service import Malformed
from pocketmq.server.grpc_routing import parse_address

log = logging.getLogger(__name__)

CLIENT_ID_HEADER = "x-mq-client-id"
LANGUAGE_HEADER = "x-mq-language"


def header(context, name: str) -> str:
    for key, value in context.invocation_metadata() or ():
        if key == name:
            return value
    return ""


def client_id_of(context) -> str:
    return header(context, CLIENT_ID_HEADER).strip()


def require_client_id(context) -> str:
    client_id = client_id_of(context)
    if not client_id:
        raise V2StatusError(V2StatusCode.CLIENT_ID_REQUIRED, f"header {CLIENT_ID_HEADER} is required")
    return client_id


def peer_address(peer: str) -> tuple[str, int]:
    """(host, port) of a grpc peer string (``ipv4:1.2.3.4:5``, ``ipv6:[::1]:5``); ("127.0.0.1", 0) otherwise."""
    _, _, address = peer.partition(":")
    parsed = parse_address(address)
    return parsed if parsed is not None else ("127.0.0.1", 0)


def client_address(peer: str) -> str:
    """``host:port`` of a grpc peer string, as admin listings show a client."""
    host, port = peer_address(peer)
    return f"{host}:{port}"


async def guard(rpc: str, work, on_error):
    """Run one request; its failure becomes its response (``on_error(code, message)``)."""
    try:
        return await work
    except PocketMQError as exc:
        log.debug("event=grpc_request_refused rpc=%s code=%d error=%s", rpc, v2_code_of(exc), exc)
        return on_error(v2_code_of(exc), str(exc))
    except Exception:
        log.exception("event=grpc_request_failed rpc=%s", rpc)
        return on_error(V2StatusCode.INTERNAL_SERVER_ERROR, "internal error")


async def abort_malformed(context, rpc: str, request: Malformed) -> None:
    log.debug("event=grpc_malformed_request rpc=%s reason=%s", rpc, request.reason)
    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"malformed {rpc} request: {request.reason}")


def unary_not_implemented(method: str, what: str):
    """A servicer method answering RPC ``method`` with a NOT_IMPLEMENTED status saying ``what``."""

    async def answer(self, request, context):
        return codec.not_implemented_response(method, what)

    answer.__name__ = method
    return answer
