"""``pocketmq message recall HANDLE``: cancel a delayed message before it is due.

``HANDLE`` is the recall handle its send returned (``pocketmq send --delay-ms N`` prints it; the official
RocketMQ 5 clients' send receipts carry it as ``recall_handle``). The handle names the topic and the broker;
the command asks that broker, which answers with the message id, or refuses a message already due (too late)
and a handle it did not issue. A second recall of the same message succeeds again.
"""

from __future__ import annotations

import asyncio

from pocketmq.cli.output import add_action, client_config, emit, json_line
from pocketmq.client.producer import AsyncProducer
from pocketmq.client.recall import recall_handle_target


def register(subparsers) -> None:
    parser = subparsers.add_parser("message", help="act on one message", description=__doc__.split("\n\n")[0])
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    add_action(actions, "recall", "cancel a delayed message before it is due", recall, "handle")


def recall(args) -> int:
    topic, broker_name = recall_handle_target(args.handle)

    async def main() -> str:
        async with AsyncProducer(client_config(args)) as producer:
            return await producer.recall_message(topic, args.handle)

    message_id = asyncio.run(main())
    if args.json:
        emit(json_line({"message_id": message_id, "topic": topic, "broker": broker_name, "recalled": True}))
    else:
        emit(f"recalled {message_id} of {topic}@{broker_name}")
    return 0
