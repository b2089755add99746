"""Reading remoting request headers (``extFields``) the lenient way unmodified 4.x clients need.

The broker's handlers read typed headers (``server.broker_headers``); ``HeaderFields`` is the untyped form the
name server and the topic admin request still use. Values arrive as JSON strings, numbers or booleans
depending on the client (``"0"``, ``0``, ``"false"``, ``false``); the frame decoder keeps them all as strings,
and these helpers coerce them: integers also from ``"3.0"``, booleans from ``true/false/1/0`` in any case. A
missing or unparsable required field is a ``BadRequestError`` (INVALID_PARAMETER) naming the field; signature
fields (``AccessKey``, ``Signature``) are simply never read. JSON bodies are parsed with a depth bound
(``json_body``).
"""

from __future__ import annotations

import json
from typing import Any

from pocketmq.errors import BadRequestError
from pocketmq.protocol.headers import lenient_bool, lenient_int

_REQUIRED = object()


class HeaderFields:
    """Lenient access to one request's ``extFields`` by name, untyped (the name server's requests)."""

    __slots__ = ("_fields",)

    def __init__(self, fields: dict[str, str]):
        self._fields = fields

    def str(self, name: str, default: Any = _REQUIRED) -> Any:
        value = self._fields.get(name)
        if value is None or value == "":
            if default is _REQUIRED:
                raise BadRequestError(f"header field {name} is missing")
            return default
        return value

    def int(self, name: str, default: Any = _REQUIRED) -> Any:
        value = self._fields.get(name)
        if value is None or value.strip() == "":
            if default is _REQUIRED:
                raise BadRequestError(f"header field {name} is missing")
            return default
        return lenient_int(value, name)

    def bool(self, name: str, default: bool = False) -> bool:
        value = self._fields.get(name)
        if value is None:
            return default
        return lenient_bool(value, name)


# Request bodies nest a few levels (a heartbeat's subscriptions are four deep); deeper is a hostile client's.
MAX_JSON_BODY_DEPTH = 32


def json_body(body: bytes, what: str) -> Any:
    """Parse a JSON request body; BadRequestError when it is absent, not JSON, or nested deeper than
    ``MAX_JSON_BODY_DEPTH``."""
    if not body:
        raise BadRequestError(f"{what} body is missing")
    try:
        obj = json.loads(body)
    except RecursionError:  # the parser's own guard against a body nested thousands deep
        raise BadRequestError(f"{what} body is nested deeper than {MAX_JSON_BODY_DEPTH}") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadRequestError(f"{what} body is not JSON: {exc}") from None
    if json_depth_exceeds(obj, MAX_JSON_BODY_DEPTH):
        raise BadRequestError(f"{what} body is nested deeper than {MAX_JSON_BODY_DEPTH}")
    return obj


def json_depth_exceeds(obj: Any, limit: int) -> bool:
    """Whether ``obj`` (parsed JSON) has containers nested more than ``limit`` deep; iterative, and it stops at
    the first container too deep."""
    pending = [(obj, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, dict):
            children = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth > limit:
            return True
        pending.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def json_bytes(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def host_port(address: str) -> tuple[str, int]:
    """``"1.2.3.4:5"`` -> ``("1.2.3.4", 5)``; anything unusable (IPv6, blank) -> ``("127.0.0.1", 0)``,
    because 4.x records hold IPv4 hosts only."""
    host, _, port = address.rpartition(":")
    if not port.isdigit() or host.count(".") != 3:
        return ("127.0.0.1", 0)
    return (host, int(port))
