"""Java properties text (``key=value`` lines), the body of UPDATE_BROKER_CONFIG and GET_BROKER_CONFIG."""

from __future__ import annotations

from pocketmq.common.errors import BadRequestError


def parse_properties_text(body: bytes) -> dict[str, str]:
    """``key=value`` lines; ``#`` and ``!`` comments and blank lines skipped; BadRequestError on another line."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequestError("config body is not UTF-8") from None
    changes = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise BadRequestError(f"config line {line!r} is not key=value")
        changes[key.strip()] = value.strip()
    return changes


def properties_text(properties: dict[str, str]) -> bytes:
    """``properties`` as ``key=value`` lines, sorted by key; BadRequestError for a line break in a key or value."""
    for key, value in properties.items():
        if any(c in f"{key}{value}" for c in "\r\n") or "=" in key:
            raise BadRequestError(f"setting {key!r}: keys and values are one line, keys without '='")
    return "".join(f"{k}={v}\n" for k, v in sorted(properties.items())).encode("utf-8")
