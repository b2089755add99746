"""``pocketmq cluster``: the brokers registered with the name server, one row per broker address.

Columns: cluster, broker name, broker id (0 is the master), role, remoting address, gRPC address.
"""

from __future__ import annotations

from pocketmq.cli.output import add_client_options, print_rows, run_admin
from pocketmq.client.admin import AsyncAdmin
from pocketmq.cluster.route import ClusterInfo

COLUMNS = ["cluster", "broker", "broker_id", "role", "address", "grpc"]


def register(subparsers) -> None:
    parser = subparsers.add_parser("cluster", help="list the brokers registered with the name server",
                                   description=__doc__.split("\n\n")[0])
    add_client_options(parser)
    parser.set_defaults(func=run)


def broker_rows(info: ClusterInfo) -> list[dict]:
    rows = []
    for name, broker in sorted(info.broker_addr_table.items()):
        for broker_id, addr in sorted(broker.broker_addrs.items()):
            rows.append({"cluster": broker.cluster, "broker": name, "broker_id": broker_id,
                         "role": "master" if broker_id == 0 else "slave", "address": addr,
                         "grpc": info.grpc_addrs.get(addr)})
    return rows


def run(args) -> int:
    async def action(admin: AsyncAdmin) -> int:
        rows = broker_rows(await admin.cluster_info())
        print_rows(args, rows, COLUMNS)
        return 0

    return run_admin(args, action)
