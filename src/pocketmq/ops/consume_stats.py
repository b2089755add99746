"""A group as rows (``pocketmq group``, the console's groups): its config, its GET_CONSUME_STATS answers per
queue (the committed and the broker's offset, the lag, the POP state), and the offsets a reset moved it to."""

from __future__ import annotations

from pocketmq.client.admin import GroupConfig

# The POP columns and the GET_CONSUME_STATS entry fields they come from (PocketMQ's; 0 from other brokers).
POP_FIELDS = {
    "in_flight": "popInFlight",
    "waiting_to_revive": "popWaitingToRevive",
    "retried": "popRetried",
    "dead_lettered": "popDeadLettered",
    "ck_rewrites": "popCkRewrites",
    "ck_endings": "popCkEndings",
}


def offset_rows(stats_by_broker: dict[str, dict]) -> list[dict]:
    """Rows of the brokers' GET_CONSUME_STATS answers (``offsetTable`` lists), sorted by topic, broker, queue."""
    rows = []
    for broker_name, stats in stats_by_broker.items():
        for entry in stats.get("offsetTable") or []:
            broker_offset, consumer_offset = int(entry["brokerOffset"]), int(entry["consumerOffset"])
            rows.append(
                {
                    "topic": entry["topic"],
                    "broker": entry.get("brokerName", broker_name),
                    "queue_id": int(entry["queueId"]),
                    "consumer_offset": consumer_offset,
                    "broker_offset": broker_offset,
                    "lag": max(0, broker_offset - consumer_offset),
                    **{column: int(entry.get(field, 0)) for column, field in POP_FIELDS.items()},
                }
            )
    return sorted(rows, key=lambda r: (r["topic"], r["broker"], r["queue_id"]))


def group_row(config: GroupConfig) -> dict:
    return {
        "group": config.group,
        "retry_max_times": config.retry_max_times,
        "retry_queue_nums": config.retry_queue_nums,
        "fifo": config.consume_message_orderly,
        "consume_enable": config.consume_enable,
    }


def reset_rows(by_broker: dict[str, dict]) -> list[dict]:
    """Rows of the brokers' answers to a reset (``ConsumerAdmin.reset_offset``): each queue's new offset."""
    return [
        {
            "topic": entry["topic"],
            "broker": broker,
            "queue_id": entry["queueId"],
            "offset": entry["offset"],
            "consumers_notified": body.get("consumersNotified", 0),
        }
        for broker, body in sorted(by_broker.items())
        for entry in body.get("offsetTable") or []
    ]
