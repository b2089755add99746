"""``pocketmq cluster``: the brokers registered with the name server, one row per broker address.

Columns: cluster, broker name, broker id (0 is the master), role (``master``, ``slave``, or ``acting master``
for a slave that runs its gone master's services), remoting address, gRPC address, and from
each broker's GET_BROKER_RUNTIME_INFO: a slave's replication lag as its master sees it (``lag_bytes``,
``lag_s``: age of the oldest record it has not acked) and the states of the broker's circuit breakers per
remote broker (``breakers``; ``-`` when it has none, ``?`` when the broker did not answer). Under a controller
(``serve --controller``, docs/failover.md) four more, as each broker last read them from etcd: the group's
``epoch``, its ``master`` (``<broker id>@<address>``; ``-`` while nobody holds the lease), the ``in_sync``
broker ids and the master's ``lease`` (the etcd lease id, hex).
"""

from __future__ import annotations

import asyncio
import json

from pocketmq.cli.output import add_client_options, print_rows, run_admin
from pocketmq.client.admin import AsyncAdmin
from pocketmq.protocol.route import ClusterInfo

COLUMNS = ["cluster", "broker", "broker_id", "role", "address", "grpc", "lag_bytes", "lag_s", "breakers"]
CONTROLLER_COLUMNS = ["epoch", "master", "in_sync", "lease"]  # shown when a broker runs under a controller


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "cluster", help="list the brokers registered with the name server", description=__doc__.split("\n\n")[0]
    )
    add_client_options(parser)
    parser.set_defaults(func=run)


def broker_rows(info: ClusterInfo) -> list[dict]:
    rows = []
    for name, broker in sorted(info.broker_addr_table.items()):
        for broker_id, addr in sorted(broker.broker_addrs.items()):
            rows.append(
                {
                    "cluster": broker.cluster,
                    "broker": name,
                    "broker_id": broker_id,
                    "role": "master" if broker_id == 0 else "slave",
                    "address": addr,
                    "grpc": info.grpc_addrs.get(addr),
                }
            )
    return rows


def add_runtime_columns(rows: list[dict], runtime: dict[str, dict[str, str] | None]) -> list[dict]:
    """``rows`` with lag and breaker columns from the runtime info of each address (None: no answer), and the
    role of a slave that acts for its gone master as ``acting master``."""
    masters = {row["broker"]: row["address"] for row in rows if row["broker_id"] == 0}
    result = []
    for row in rows:
        own = runtime.get(row["address"])
        master = runtime.get(masters.get(row["broker"], "")) or {}
        lag = json.loads(master.get("haSlaveLag") or "{}").get(row["address"]) if row["broker_id"] else None
        breakers = json.loads(own.get("breakerStates") or "{}") if own is not None else None
        acting = own is not None and own.get("actingMaster") == "true"
        result.append(
            {
                **row,
                "role": "acting master" if acting else row["role"],
                "lag_bytes": lag["lagBytes"] if lag else None,
                "lag_s": lag["lagMs"] / 1000 if lag else None,
                "breakers": breakers,
                **controller_columns(own or {}),
            }
        )
    return result


def controller_columns(runtime: dict[str, str]) -> dict:
    """The group as the broker last read it from the controller (all None without a controller)."""
    if "controllerEpoch" not in runtime:
        return dict.fromkeys(CONTROLLER_COLUMNS)
    in_sync = runtime.get("controllerInSync")
    return {
        "epoch": int(runtime["controllerEpoch"]),
        "master": runtime.get("controllerMaster") or "-",
        "in_sync": [int(i) for i in in_sync.split(",")] if in_sync else [],
        "lease": runtime.get("controllerLease") or "-",
    }


def columns(rows: list[dict]) -> list[str]:
    controlled = any(row.get("epoch") is not None for row in rows)
    return COLUMNS + CONTROLLER_COLUMNS if controlled else COLUMNS


def table_row(row: dict) -> dict:
    """A row for the table: breakers as ``name:STATE,...``, the in-sync set as ``id,id``."""
    breakers = row["breakers"]
    text = "?" if breakers is None else ",".join(f"{name}:{state}" for name, state in breakers.items()) or "-"
    in_sync = row.get("in_sync")
    return {**row, "breakers": text, "in_sync": None if in_sync is None else ",".join(map(str, in_sync)) or "-"}


def run(args) -> int:
    async def action(admin: AsyncAdmin) -> int:
        rows = broker_rows(await admin.cluster_info())
        answers = await asyncio.gather(*(admin.runtime_info(row["address"]) for row in rows), return_exceptions=True)
        runtime = {row["address"]: None if isinstance(a, BaseException) else a for row, a in zip(rows, answers)}
        rows = add_runtime_columns(rows, runtime)
        print_rows(args, rows if args.json else [table_row(r) for r in rows], columns(rows))
        return 0

    return run_admin(args, action)
