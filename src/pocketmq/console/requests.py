"""Reading an API request's input: query parameters and JSON bodies, checked before anything is asked of a
broker (a bad value is a 400 that changed nothing)."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from pocketmq.common.errors import BadRequestError


async def json_body(request: web.Request) -> dict[str, Any]:
    """The request's JSON object body; BadRequestError when it is not one."""
    try:
        body = await request.json(loads=json.loads)
    except (ValueError, UnicodeDecodeError):
        raise BadRequestError("the body must be a JSON object") from None
    if not isinstance(body, dict):
        raise BadRequestError("the body must be a JSON object")
    return body


def int_field(obj: dict[str, Any], name: str, *, default: int | None = None, minimum: int = 0) -> int | None:
    """``obj[name]`` as an int of at least ``minimum`` (a JSON number or a query string's digits)."""
    value = obj.get(name)
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        raise BadRequestError(f"{name} must be an integer, not {value!r}")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise BadRequestError(f"{name} must be an integer, not {value!r}") from None
    if number < minimum:
        raise BadRequestError(f"{name} must be at least {minimum}, not {number}")
    return number


def float_field(obj: dict[str, Any], name: str) -> float | None:
    value = obj.get(name)
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise BadRequestError(f"{name} must be a number, not {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise BadRequestError(f"{name} must be a number, not {value!r}") from None


def str_field(obj: dict[str, Any], name: str, *, required: bool = False) -> str | None:
    value = obj.get(name)
    if value is None or value == "":
        if required:
            raise BadRequestError(f"{name} is required")
        return None
    if not isinstance(value, str):
        raise BadRequestError(f"{name} must be a string, not {value!r}")
    return value


def flag(obj: dict[str, Any], name: str) -> bool:
    value = obj.get(name, False)
    if isinstance(value, bool):
        return value
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("", "0", "false", "no", "off"):
        return False
    raise BadRequestError(f"{name} must be true or false, not {value!r}")
