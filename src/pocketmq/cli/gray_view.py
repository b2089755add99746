"""The gray parts of ``pocketmq group``: ``describe`` lists which live clients of a group are gray and which
queues each holds (push consumers, as their heartbeats report) or may pop (POP clients: the broker's
server-side share), from every master's GET_GROUP_GRAY_CLIENTS answer; ``create --gray-clients GLOBS
--gray-queue-ratio R`` sets the group attributes ``gray.clients`` / ``gray.queue.ratio`` (docs/gray.md)."""

from __future__ import annotations

CLIENT_COLUMNS = ["client_id", "broker", "gray", "assigned_by", "queues"]


def gray_attributes(args) -> dict[str, str] | None:
    """The group attributes of ``group create``'s gray options (None when neither is given)."""
    attributes = {}
    if args.gray_clients is not None:
        attributes["gray.clients"] = args.gray_clients
    if args.gray_queue_ratio is not None:
        attributes["gray.queue.ratio"] = args.gray_queue_ratio
    return attributes or None


def _compact(pairs: list) -> str:
    """``[[topic, q], ...]`` as ``topic:0,1,2 %RETRY%g_topic:1``."""
    by_topic: dict[str, list[int]] = {}
    for topic, queue_id in pairs:
        by_topic.setdefault(topic, []).append(int(queue_id))
    return " ".join(f"{t}:{','.join(map(str, sorted(qs)))}" for t, qs in sorted(by_topic.items())) or "-"


def client_rows(answers: dict[str, dict], *, as_json: bool = False) -> list[dict]:
    """One row per (client, broker), sorted by client id then broker."""
    rows = []
    for broker_name, answer in answers.items():
        for client in answer.get("clients") or []:
            queues = client.get("queues") or []
            rows.append(
                {
                    "client_id": client["clientId"],
                    "broker": answer.get("brokerName", broker_name),
                    "gray": bool(client.get("gray")),
                    "assigned_by": client.get("assignedBy", ""),
                    "queues": queues if as_json else _compact(queues),
                }
            )
    return sorted(rows, key=lambda r: (r["client_id"], r["broker"]))
