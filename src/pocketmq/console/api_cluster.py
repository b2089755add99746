"""``GET /api/cluster``: every broker registered with the name server, with its runtime info (role, version,
uptime, messages put and got, replication lag, circuit breakers, disk use)."""

from __future__ import annotations

import asyncio
import json

from aiohttp import web

from pocketmq.client.admin import AsyncAdmin, BrokerAddress
from pocketmq.console.login import admin_of

routes = web.RouteTableDef()


def _json_field(info: dict[str, str], name: str) -> dict:
    try:
        value = json.loads(info.get(name) or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _int(info: dict[str, str], name: str) -> int | None:
    value = info.get(name)
    return int(value) if value is not None and value.lstrip("-").isdigit() else None


def broker_row(broker: BrokerAddress, info: dict[str, str] | BaseException) -> dict:
    row: dict = {"broker": broker.broker_name, "broker_id": broker.broker_id, "address": broker.addr}
    if isinstance(info, BaseException):
        return {**row, "error": str(info) or type(info).__name__}
    boot_ms = _int(info, "bootTimestamp")
    min_offset, max_offset = _int(info, "commitLogMinOffset"), _int(info, "commitLogMaxOffset")
    return {
        **row,
        "role": info.get("brokerRole"),
        "version": info.get("brokerVersionDesc"),
        "boot_timestamp_ms": boot_ms,
        "uptime": info.get("runtime"),
        "put": _int(info, "msgPutTotalTodayNow"),
        "got": _int(info, "msgGetTotalTodayNow"),
        "topics": _int(info, "topicCount"),
        "groups": _int(info, "subscriptionGroupCount"),
        "replication": {
            "master_address": info.get("masterAddr"),
            "max_lag_bytes": _int(info, "haMaxLagBytes"),
            "slaves": _json_field(info, "haSlaveLag"),
        },
        "breakers": _json_field(info, "breakerStates"),
        "disk": {
            "commit_log_bytes": None if min_offset is None or max_offset is None else max_offset - min_offset,
            "used_ratio": float(info["commitLogDiskRatio"]) if "commitLogDiskRatio" in info else None,
        },
        "runtime_info": info,
    }


async def cluster_brokers(admin: AsyncAdmin) -> list[dict]:
    brokers = await admin.brokers()
    answers = await asyncio.gather(*(admin.runtime_info(b.addr) for b in brokers), return_exceptions=True)
    return [broker_row(b, info) for b, info in zip(brokers, answers)]


@routes.get("/api/cluster")
async def cluster(request: web.Request) -> web.Response:
    admin = await admin_of(request)
    return web.json_response({"namesrv": admin.config.namesrv_addr, "brokers": await cluster_brokers(admin)})
