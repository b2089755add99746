"""``pocketmq topic route TOPIC``: the name server's route of a topic, one row per broker address: the broker
group, its id (0 is the master), its remoting and gRPC addresses, and the group's read and write queues and
permission (``rw``, ``r-``, ``-w``). A topic the name server does not know is an error (nothing is created)."""

from __future__ import annotations

from pocketmq.cli.output import add_action, print_rows, run_admin
from pocketmq.client.admin import AsyncAdmin
from pocketmq.client.replies import check_topic
from pocketmq.common.topic import PERM_READ, PERM_WRITE

ROUTE_COLUMNS = ["broker", "broker_id", "cluster", "address", "grpc", "read_queues", "write_queues", "perm"]


def add_actions(actions) -> None:
    add_action(actions, "route", "where a topic lives: brokers, addresses and queues", route, "topic")


def perm_text(perm: int) -> str:
    return ("r" if perm & PERM_READ else "-") + ("w" if perm & PERM_WRITE else "-")


def route(args) -> int:
    async def action(admin: AsyncAdmin) -> None:
        check_topic(args.topic)
        data = await admin.instance.fetch_route_data(admin.namespace.wrap(args.topic), auto_create=False)
        queues = {qd.broker_name: qd for qd in data.queue_datas}
        rows = []
        for broker in sorted(data.broker_datas, key=lambda b: b.broker_name):
            qd = queues.get(broker.broker_name)
            for broker_id, addr in sorted(broker.broker_addrs.items()):
                rows.append(
                    {
                        "topic": args.topic,
                        "broker": broker.broker_name,
                        "broker_id": broker_id,
                        "cluster": broker.cluster,
                        "address": addr,
                        "grpc": data.grpc_addrs.get(addr),
                        "read_queues": qd.read_queue_nums if qd else 0,
                        "write_queues": qd.write_queue_nums if qd else 0,
                        "perm": perm_text(qd.perm) if qd else None,
                    }
                )
        print_rows(args, rows, ROUTE_COLUMNS)

    return run_admin(args, action)
