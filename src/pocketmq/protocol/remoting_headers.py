"""Reading remoting request headers (``extFields``) the lenient way unmodified 4.x clients need.

The broker's handlers and the name server read typed headers (``server.broker_headers``,
``protocol.namesrv_headers``); ``HeaderFields`` is the untyped form the topic admin request still uses. Values
arrive as JSON strings, numbers or booleans depending on the client (``"0"``, ``0``, ``"false"``, ``false``); the
frame decoder keeps them all as strings, and these helpers coerce them: integers also from ``"3.0"``, booleans from
``true/false/1/0`` in any case. A missing or unparsable required field is a ``BadRequestError``
(INVALID_PARAMETER) naming the field; signature fields (``AccessKey``, ``Signature``) are simply never read. JSON bodies are parsed with a depth bound
(``json_body``).
"""

from __future__ import annotations

import builtins
import json
from typing import Any

from pocketmq.common.errors import BadRequestError
from pocketmq.protocol.headers import lenient_bool, lenient_int
from pocketmq.protocol.json_depth import json_too_deep
from pocketmq.protocol.limits import DEFAULT_MAX_JSON_DEPTH

_REQUIRED = object()


class HeaderFields:
    """Lenient access to one request's ``extFields`` by name, untyped (UPDATE_AND_CREATE_TOPIC)."""

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

    # Past the method ``str``, the class body names the built-in type as ``builtins.str``.
    def int(self, name: builtins.str, default: Any = _REQUIRED) -> Any:
        value = self._fields.get(name)
        if value is None or value.strip() == "":
            if default is _REQUIRED:
                raise BadRequestError(f"header field {name} is missing")
            return default
        return lenient_int(value, name)

    def bool(self, name: builtins.str, default: bool = False) -> bool:
        value = self._fields.get(name)
        if value is None:
            return default
        return lenient_bool(value, name)


# Request bodies nest a few levels (a heartbeat's subscriptions are four deep); deeper is a hostile client's.
MAX_JSON_BODY_DEPTH = DEFAULT_MAX_JSON_DEPTH  # bodies nest no deeper than headers may (protocol/limits.py)


def json_body(body: bytes, what: str) -> Any:
    """Parse a JSON request body; BadRequestError when it is absent, not JSON, or nested deeper than
    ``MAX_JSON_BODY_DEPTH`` (measured before parsing, as for headers: a parser pays for each level first)."""
    if not body:
        raise BadRequestError(f"{what} body is missing")
    try:
        text = body.decode()
    except UnicodeDecodeError as exc:
        raise BadRequestError(f"{what} body is not JSON: {exc}") from None
    if json_too_deep(text, MAX_JSON_BODY_DEPTH):
        raise BadRequestError(f"{what} body is nested deeper than {MAX_JSON_BODY_DEPTH}")
    try:
        return json.loads(text)
    except ValueError as exc:
        raise BadRequestError(f"{what} body is not JSON: {exc}") from None


def json_bytes(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def host_port(address: str) -> tuple[str, int]:
    """``"1.2.3.4:5"`` -> ``("1.2.3.4", 5)``; anything unusable (IPv6, blank) -> ``("127.0.0.1", 0)``,
    because 4.x records hold IPv4 hosts only."""
    host, _, port = address.rpartition(":")
    if not port.isdigit() or host.count(".") != 3:
        return ("127.0.0.1", 0)
    return (host, int(port))
