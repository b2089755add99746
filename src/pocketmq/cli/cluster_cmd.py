"""``pocketmq cluster``: the brokers registered with the name server, one row per broker address.

Columns: cluster, broker name, broker id (0 is the master), role (``master``, ``slave``, or ``acting master``
for a slave that runs its gone master's services), remoting address, gRPC address, and from
each broker's GET_BROKER_RUNTIME_INFO: a slave's replication lag as its master sees it (``lag_bytes``,
``lag_s``: age of the oldest record it has not acked) and the states of the broker's circuit breakers per
remote broker (``breakers``; ``-`` when it has none, ``?`` when the broker did not answer).
"""

from __future__ import annotations

import asyncio
import json

from pocketmq.cli.output import add_client_options, print_rows, run_admin
from pocketmq.client.admin import AsyncAdmin
from pocketmq.protocol.route import ClusterInfo

COLUMNS = ["cluster", "broker", "broker_id", "role", "address", "grpc", "lag_bytes", "lag_s", "breakers"]


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
            }
        )
    return result


def breakers_text(row: dict) -> dict:
    """A row for the table: breakers as ``name:STATE,...``."""
    breakers = row["breakers"]
    text = "?" if breakers is None else ",".join(f"{name}:{state}" for name, state in breakers.items()) or "-"
    return {**row, "breakers": text}


def run(args) -> int:
    async def action(admin: AsyncAdmin) -> int:
        rows = broker_rows(await admin.cluster_info())
        answers = await asyncio.gather(*(admin.runtime_info(row["address"]) for row in rows), return_exceptions=True)
        runtime = {row["address"]: None if isinstance(a, BaseException) else a for row, a in zip(rows, answers)}
        rows = add_runtime_columns(rows, runtime)
        print_rows(args, rows if args.json else [breakers_text(r) for r in rows], COLUMNS)
        return 0

    return run_admin(args, action)
