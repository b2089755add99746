"""``/api/config``: each broker's settings with whether each can change at run time, and a change in place
(checked before any broker is asked; then made as ``pocketmq config set`` makes it)."""

from __future__ import annotations

import asyncio

from aiohttp import web

from pocketmq.common.errors import BadRequestError, ClientError
from pocketmq.console.login import admin_of
from pocketmq.console.requests import json_body
from pocketmq.ops.broker_settings import DYNAMIC_FIELDS, change_setting, checked_change

routes = web.RouteTableDef()


@routes.get("/api/config")
async def get_config(request: web.Request) -> web.Response:
    admin = await admin_of(request)
    brokers = await admin.brokers(request.query.get("broker") or None)
    answers = await asyncio.gather(*(admin.broker_config(b.addr) for b in brokers), return_exceptions=True)
    rows = []
    for broker, settings in zip(brokers, answers):
        row: dict = {"broker": broker.broker_name, "broker_id": broker.broker_id, "address": broker.addr}
        if isinstance(settings, BaseException):
            row["error"] = str(settings) or type(settings).__name__
        else:
            row["settings"] = settings
        rows.append(row)
    return web.json_response({"dynamic": sorted(DYNAMIC_FIELDS), "brokers": rows})


@routes.put("/api/config")
async def set_config(request: web.Request) -> web.Response:
    """Body ``{"key": K, "value": V}``; ``?broker=NAME``: only that broker group's master and slaves."""
    body = await json_body(request)
    key, value = body.get("key"), body.get("value")
    if not isinstance(key, str) or not key or value is None or isinstance(value, dict | list):
        raise BadRequestError('expected {"key": SETTING, "value": VALUE}')
    value = str(value).lower() if isinstance(value, bool) else str(value)
    name = checked_change(key, value)
    admin = await admin_of(request)
    brokers = await admin.brokers(request.query.get("broker") or None)
    failed = await change_setting(admin, brokers, name, value)
    if failed:
        raise ClientError(
            f"{name} changed on {len(brokers) - len(failed)} of {len(brokers)} brokers; not on "
            + "; ".join(f"{b.broker_name}/{b.broker_id} ({r})" for b, r in failed.items())
        )
    return web.json_response(
        {"key": name, "value": value, "brokers": [f"{b.broker_name}/{b.broker_id}" for b in brokers]}
    )
