"""Binding a servicer object to ``apache.rocketmq.v2.MessagingService`` on a grpc.aio server.

The generated ``add_MessagingServiceServicer_to_server`` parses requests with the protobuf class; bytes that do
not parse make grpc answer INTERNAL ("Exception deserializing request"), which tells a client nothing. Here
every method gets a lenient deserializer instead: undecodable bytes arrive at the servicer as a ``Malformed``
value, and the servicer answers INVALID_ARGUMENT (or, inside a Telemetry stream, a status command) without
breaking anything else.

The method table comes from the service descriptor, so it follows the installed protocol version; the
servicer has a coroutine (unary response) or an async generator (streamed response) per method it serves.
"""

from __future__ import annotations

from dataclasses import dataclass

import grpc
from google.protobuf.message import DecodeError
from rocketmq.grpc_protocol import service_pb2 as spb

from pocketmq.protocol.grpc_codec import SERVICE_NAME

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
        make = grpc.stream_stream_rpc_method_handler
    elif method.server_streaming:
        make = grpc.unary_stream_rpc_method_handler
    elif method.client_streaming:
        make = grpc.stream_unary_rpc_method_handler
    else:
        make = grpc.unary_unary_rpc_method_handler
    return make(behaviour, request_deserializer=parse, response_serializer=serialize)


def add_messaging_service(servicer, server) -> None:
    """Serve the MessagingService methods ``servicer`` has on ``server`` (a grpc.aio server); grpc answers
    UNIMPLEMENTED for the others."""
    handlers = {m.name: _handler(m, getattr(servicer, m.name)) for m in _SERVICE.methods if hasattr(servicer, m.name)}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE_NAME, handlers),))
