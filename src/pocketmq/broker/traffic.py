"""Messages and bytes in and out of a broker, counted on the send and read paths with plain ints.

``received`` runs once per stored send and ``delivered`` once per read that found messages (a pull, a queue of a
POP): a dict lookup and two additions, no lock and no label set (the broker serves its requests on its event
loop). The counter families are made only when someone reads them (``families``, a metrics source).
"""

from __future__ import annotations

from pocketmq.metrics.samples import FamilySnapshot, Sample

MESSAGES_IN = "pocketmq_messages_in_total"
BYTES_IN = "pocketmq_message_bytes_in_total"
MESSAGES_OUT = "pocketmq_messages_out_total"
BYTES_OUT = "pocketmq_message_bytes_out_total"


class Traffic:
    def __init__(self) -> None:
        self._in: dict[str, list[int]] = {}  # topic -> [messages, body bytes]
        self._out: dict[tuple[str, str], list[int]] = {}  # (topic, group) -> [messages, record bytes]

    def received(self, topic: str, messages: int, body_bytes: int) -> None:
        """``messages`` of a send stored in ``topic`` (its real topic for a delayed or half message)."""
        counts = self._in.get(topic)
        if counts is None:
            counts = self._in[topic] = [0, 0]
        counts[0] += messages
        counts[1] += body_bytes

    def delivered(self, topic: str, group: str, records: list[bytes]) -> None:
        """``records`` of ``topic`` handed to a consumer of ``group`` (a pull's or a POP's)."""
        key = (topic, group)
        counts = self._out.get(key)
        if counts is None:
            counts = self._out[key] = [0, 0]
        counts[0] += len(records)
        counts[1] += sum(map(len, records))

    def families(self) -> list[FamilySnapshot]:
        incoming = sorted(self._in.items())
        outgoing = sorted(self._out.items())
        return [
            FamilySnapshot(
                MESSAGES_IN,
                "counter",
                "Messages stored by producers' sends, by topic",
                [Sample("", {"topic": t}, float(c[0])) for t, c in incoming],
            ),
            FamilySnapshot(
                BYTES_IN,
                "counter",
                "Body bytes of the messages stored by producers' sends, by topic",
                [Sample("", {"topic": t}, float(c[1])) for t, c in incoming],
            ),
            FamilySnapshot(
                MESSAGES_OUT,
                "counter",
                "Messages handed to consumers by pulls and POPs, by topic and consumer group",
                [Sample("", {"topic": t, "group": g}, float(c[0])) for (t, g), c in outgoing],
            ),
            FamilySnapshot(
                BYTES_OUT,
                "counter",
                "Stored bytes of the messages handed to consumers, by topic and consumer group",
                [Sample("", {"topic": t, "group": g}, float(c[1])) for (t, g), c in outgoing],
            ),
        ]
