"""``pocketmq broker status [--broker NAME]``: each broker's runtime info (GET_BROKER_RUNTIME_INFO), one row per
broker address: role, version, uptime, messages put and got since it started, topics, groups, consumer and
producer groups online, pulls held. ``--json`` gives every field of the broker's table, by RocketMQ's names
where they exist. A broker that does not answer is shown with its error, and the command then exits 1."""

from __future__ import annotations

import asyncio

from pocketmq.cli.output import add_client_options, print_rows, run_admin
from pocketmq.client.admin import AsyncAdmin

COLUMNS = ["broker", "broker_id", "address", "role", "version", "uptime", "put", "got", "topics", "groups", "online"]
# column -> the runtime info field it shows
FIELDS = {
    "role": "brokerRole",
    "version": "brokerVersionDesc",
    "uptime": "runtime",
    "put": "msgPutTotalTodayNow",
    "got": "msgGetTotalTodayNow",
    "topics": "topicCount",
    "groups": "subscriptionGroupCount",
}


def register(subparsers) -> None:
    parser = subparsers.add_parser("broker", help="broker runtime status", description=__doc__.split("\n\n")[0])
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = actions.add_parser("status", help="each broker's runtime info")
    add_client_options(p)
    p.add_argument("--broker", help="only the brokers of this broker name")
    p.set_defaults(func=status)


def status(args) -> int:
    async def action(admin: AsyncAdmin) -> int:
        brokers = await admin.brokers(args.broker)
        answers = await asyncio.gather(*(admin.runtime_info(b.addr) for b in brokers), return_exceptions=True)
        rows = []
        failed = False
        for broker, info in zip(brokers, answers):
            row: dict = {"broker": broker.broker_name, "broker_id": broker.broker_id, "address": broker.addr}
            if isinstance(info, BaseException):
                if not isinstance(info, Exception):
                    raise info
                failed = True
                row["error"] = str(info) or type(info).__name__
            else:
                row.update({column: info.get(name) for column, name in FIELDS.items()})
                row["online"] = f"{info.get('consumerGroupsOnline', 0)}c/{info.get('producerGroupsOnline', 0)}p"
                if args.json:
                    row["runtime_info"] = info
            rows.append(row)
        print_rows(args, rows, COLUMNS + (["error"] if failed else []))
        return 1 if failed else 0

    return run_admin(args, action)
