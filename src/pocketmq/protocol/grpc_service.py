"""Binding a servicer object to ``apache.rocketmq.v2.MessagingService`` on a grpc.aio server.

The generated ``add_MessagingServiceServicer_to_server`` parses requests with the protobuf class; bytes that do
not parse make grpc answer INTERNAL ("Exception deserializing request"), which tells a client nothing. Here
every method gets a lenient deserializer instead: undecodable bytes arrive at the servicer as a ``Malformed``
value, and the servicer answers INVALID_ARGUMENT (or, inside a Telemetry stream, a status command) without
breaking anything else.

The method table comes from the service descriptor, so it follows the installed protocol version; the
servicer has a coroutine (unary response) or an async generator (streamed response) per method it serves.

Every method is also namespaced here (protocol/grpc_namespace.py): each request's resources are rewritten to the
broker's names (``ns%name``) before the servicer sees it, and each response's back to the client's, so namespaces
hold on every request path without the servicer knowing of them.
"""

from __future__ import annotations

from dataclasses import dataclass

import grpc
from google.protobuf.message import DecodeError
from rocketmq.grpc_protocol import service_pb2 as spb

from pocketmq.protocol.grpc_codec import SERVICE_NAME
from pocketmq.protocol.grpc_namespace import NAMESPACE_HEADER, unwrap, wrap

_SERVICE = spb.DESCRIPTOR.services_by_name[SERVICE_NAME.rsplit(".", 1)[1]]
METHOD_NAMES = tuple(m.name for m in _SERVICE.methods)


@dataclass(frozen=True, slots=True)
class Malformed:
    """A request whose bytes are not the method's protobuf message."""

    reason: str


def _lenient_parser(message_class):
    def parse(data: bytes):
        try:
            return message_class.FromString(data)
        except (DecodeError, ValueError) as exc:  # ValueError: invalid UTF-8 in a string field
            return Malformed(str(exc) or "undecodable request")

    return parse


def _handler(method, behaviour):
    parse = _lenient_parser(getattr(spb, method.input_type.name))
    serialize = getattr(spb, method.output_type.name).SerializeToString
    if method.client_streaming and method.server_streaming:
        make, namespaced = grpc.stream_stream_rpc_method_handler, _namespaced_stream_stream
    elif method.server_streaming:
        make, namespaced = grpc.unary_stream_rpc_method_handler, _namespaced_unary_stream
    elif method.client_streaming:
        raise ValueError(f"no v2 method streams only its requests: {method.name}")
    else:
        make, namespaced = grpc.unary_unary_rpc_method_handler, _namespaced_unary_unary
    return make(namespaced(behaviour), request_deserializer=parse, response_serializer=serialize)


# -- namespaces (protocol/grpc_namespace.py): the servicer sees the broker's names, the client its own ----------


def _header_namespace(context) -> str | None:
    for key, value in context.invocation_metadata() or ():
        if key == NAMESPACE_HEADER:
            return value
    return None


def _wrap(request, header: str | None) -> str:
    """The namespace of ``request``, whose resources now carry broker names. A header present and empty says
    the client has no namespace (the Python client sends it so, and its resources' namespaces are the same
    ""): nothing to rewrite, which spares every request of such a client the walk."""
    if header == "" or isinstance(request, Malformed):
        return ""
    return wrap(request, header or "")


def _namespaced_unary_unary(behaviour):
    async def call(request, context):
        namespace = _wrap(request, _header_namespace(context))
        return unwrap(await behaviour(request, context), namespace)

    return call


def _namespaced_unary_stream(behaviour):
    async def call(request, context):
        namespace = _wrap(request, _header_namespace(context))
        async for response in behaviour(request, context):
            yield unwrap(response, namespace)

    return call


def _namespaced_stream_stream(behaviour):
    async def call(request_iterator, context):
        header = _header_namespace(context)
        namespace = [header or ""]  # the stream's: its header's, or the first namespaced command's

        async def requests():
            async for request in request_iterator:
                found = _wrap(request, header)
                if found and not namespace[0]:
                    namespace[0] = found
                yield request

        async for response in behaviour(requests(), context):
            yield unwrap(response, namespace[0])

    return call


def add_messaging_service(servicer, server) -> None:
    """Serve the MessagingService methods ``servicer`` has on ``server`` (a grpc.aio server); grpc answers
    UNIMPLEMENTED for the others."""
    handlers = {m.name: _handler(m, getattr(servicer, m.name)) for m in _SERVICE.methods if hasattr(servicer, m.name)}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE_NAME, handlers),))
