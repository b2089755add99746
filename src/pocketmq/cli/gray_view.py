"""The gray part of ``pocketmq group describe``: which live clients of a group are gray and which queues each
holds (push consumers, as their heartbeats report) or may pop (POP clients: the broker's server-side share),
from every master's GET_GROUP_GRAY_CLIENTS answer (docs/gray.md)."""

from __future__ import annotations

CLIENT_COLUMNS = ["client_id", "broker", "gray", "assigned_by", "queues"]


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
            rows.append({"client_id": client["clientId"], "broker": answer.get("brokerName", broker_name),
                         "gray": bool(client.get("gray")), "assigned_by": client.get("assignedBy", ""),
                         "queues": queues if as_json else _compact(queues)})
    return sorted(rows, key=lambda r: (r["client_id"], r["broker"]))
