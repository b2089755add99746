"""Reading remoting request headers (``extFields``) the lenient way unmodified 4.x clients need.

Values arrive as JSON strings, numbers or booleans depending on the client (``"0"``, ``0``, ``"false"``,
``false``); the frame decoder keeps them all as strings, and these helpers coerce them: integers also from
``"3.0"``, booleans from ``true/false/1/0`` in any case. A missing or unparsable required field is a
``BadRequestError`` (INVALID_PARAMETER) naming the field; signature fields (``AccessKey``, ``Signature``) are
simply never read.

SEND_MESSAGE_V2 carries SEND_MESSAGE's fields under one-letter names; ``SEND_V2_FIELD_NAMES`` maps them, and
``HeaderFields(fields, SEND_V2_SHORT_NAMES)`` reads a V2 header by the long names without copying it.
"""

from __future__ import annotations

import json
from typing import Any

from pocketmq.errors import BadRequestError

_REQUIRED = object()

# SendMessageRequestHeaderV2's one-letter names -> SendMessageRequestHeader's names.
SEND_V2_FIELD_NAMES = {
    "a": "producerGroup", "b": "topic", "c": "defaultTopic", "d": "defaultTopicQueueNums", "e": "queueId",
    "f": "sysFlag", "g": "bornTimestamp", "h": "flag", "i": "properties", "j": "reconsumeTimes", "k": "unitMode",
    "l": "maxReconsumeTimes", "m": "batch", "n": "brokerName",
}
SEND_V2_SHORT_NAMES = {long: short for short, long in SEND_V2_FIELD_NAMES.items()}


def lenient_int(raw: str, name: str) -> int:
    try:
        return int(raw)
    except ValueError:
        pass
    try:
        as_float = float(raw)
    except ValueError:
        raise BadRequestError(f"header field {name}={raw!r} is not an integer") from None
    if not as_float.is_integer():
        raise BadRequestError(f"header field {name}={raw!r} is not an integer")
    return int(as_float)


def lenient_bool(raw: str, name: str) -> bool:
    text = raw.strip().lower()
    if text in ("true", "1"):
        return True
    if text in ("false", "0", ""):
        return False
    raise BadRequestError(f"header field {name}={raw!r} is not a boolean")


class HeaderFields:
    """Typed, lenient access to one request's ``extFields``; with ``names``, a field is looked up under
    ``names[name]`` when present there (a header that spells the fields differently)."""

    __slots__ = ("_fields", "_names")

    def __init__(self, fields: dict[str, str], names: dict[str, str] | None = None):
        self._fields = fields
        self._names = names

    # Each reader looks its field up itself (no shared helper): a send request reads nine, and a call more per
    # read costs ~0.5 µs per message.
    def str(self, name: str, default: Any = _REQUIRED) -> Any:
        names = self._names
        value = self._fields.get(name if names is None else names.get(name, name))
        if value is None or value == "":
            if default is _REQUIRED:
                raise BadRequestError(f"header field {name} is missing")
            return default
        return value

    def int(self, name: str, default: Any = _REQUIRED) -> Any:
        names = self._names
        value = self._fields.get(name if names is None else names.get(name, name))
        try:
            return int(value)  # type: ignore[arg-type]  # the usual case, first: a plain integer
        except (TypeError, ValueError):
            pass
        if value is None or value.strip() == "":
            if default is _REQUIRED:
                raise BadRequestError(f"header field {name} is missing")
            return default
        return lenient_int(value, name)

    def bool(self, name: str, default: bool = False) -> bool:
        names = self._names
        value = self._fields.get(name if names is None else names.get(name, name))
        if value is None:
            return default
        return lenient_bool(value, name)


def json_body(body: bytes, what: str) -> Any:
    """Parse a JSON request body; BadRequestError when it is absent or not JSON."""
    if not body:
        raise BadRequestError(f"{what} body is missing")
    try:
        return json.loads(body)
    except (UnicodeDecodeError, ValueError) as exc:
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
