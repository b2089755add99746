"""PocketMQ's ratio to each peer broker, per workload, from the JSON lines of one ``make bench-peers`` run.

Every line is ``{"peer", "test", "date", "settings", "result"}`` (``bench/peers.py`` for PocketMQ, the peer
benchmarks for Redis Streams, NATS JetStream and RabbitMQ). A result becomes one or more *measures*: a
workload name, a value and whether more is better. PocketMQ's measures are set against the best measure of each
peer on the same workload, so a peer with several variants (NATS pull and push latency) is met at its best.
A ratio above 1 always means PocketMQ did better: msg/s divided by the peer's, latency the peer's divided by
PocketMQ's.

    python -m pocketmq.testing.peer_ratios RESULTS.jsonl
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass

POCKETMQ = "pocketmq"
# Redelivery lateness is floored at this many ms on both sides: below it a ratio says nothing but noise.
LATENESS_FLOOR_MS = 1.0
# How each benchmark names "each ack waited for" in its ack_mode setting; other values are acks not waited for
# (NATS `each` is a fire-and-forget ack; Redis `pipeline` pipelines a batch's XACKs; RabbitMQ has no setting).
ACK_WAITED = {"redis-streams": "each", "nats-jetstream": "sync", POCKETMQ: "sync"}


@dataclass(frozen=True)
class Measure:
    workload: str
    variant: str  # what distinguishes this result from others of the peer on the same workload
    value: float
    unit: str
    higher_is_better: bool


@dataclass(frozen=True)
class Row:
    pocketmq: Measure
    peers: dict[str, tuple[float, float] | None]  # peer -> (its best value, PocketMQ's ratio to it), or None


def read_lines(lines: Iterable[str]) -> list[dict]:
    """The result objects among ``lines``; anything that is not a JSON object (a server's chatter) is skipped."""
    out = []
    for line in lines:
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and "peer" in record and "test" in record:
            out.append(record)
    return out


def _durable(settings: dict) -> str:
    """A produce workload with a disk sync before each reply is a workload of its own."""
    synced = settings.get("appendfsync") == "always" or settings.get("flush") == "SYNC_FLUSH"
    return ", fsync before each reply" if synced else ""


def _variant(record: dict) -> str:
    settings = record.get("settings", {})
    bits = [
        str(settings[key])
        for key in ("queue_type", "client_kind", "consumer", "lat_mode", "reclaim")
        if settings.get(key)
    ]
    if settings.get("auto_batch"):
        bits.append("auto_batch")
    return ", ".join(bits)


def measures(record: dict) -> list[Measure]:
    """The comparable figures of one result line (none for lines such as ``loadavg`` or a disk's limits)."""
    test, settings, result = record["test"], record.get("settings", {}), record.get("result", {})
    variant = _variant(record)
    if test in ("produce_sync", "produce_batch", "consume"):
        rate = result.get("msgs_per_s")
        if not rate:
            return []
        if test == "produce_sync":
            workload = "produce, one in flight" + _durable(settings)
        elif test == "produce_batch":
            workload = f"produce, {settings.get('batch')} in flight" + _durable(settings)
        else:
            waited = settings.get("ack_mode") == ACK_WAITED.get(record["peer"])
            workload = "consume + ack, " + ("each ack waited" if waited else "acks not waited")
        return [Measure(workload, variant, float(rate), "msg/s", True)]
    if test == "latency":
        e2e = result.get("e2e_us") or {}
        at = f"e2e latency at {settings.get('rate', result.get('rate'))} msg/s"
        return [
            Measure(f"{at}, {p}", variant, float(e2e[p]), "µs", False) for p in ("p50", "p99") if e2e.get(p) is not None
        ]
    if test == "redelivery":
        late_ms = redelivery_lateness_ms(result)
        if late_ms is None:
            return []
        return [Measure("redelivery, p99 lateness past due", variant, late_ms, "ms", False)]
    return []


def redelivery_lateness_ms(result: dict) -> float | None:
    """The worst p99, over the deliveries, of the time between deliveries beyond the back-off due for it."""
    gaps = result.get("gap_ms_by_delivery") or {}
    backoff_s = result.get("backoff_s") or [result.get("ack_wait_s") or 0.0]
    late = []
    for name, pct in gaps.items():
        delivery = int(name.removeprefix("delivery"))  # the gap before delivery n (n >= 2)
        if pct.get("p99") is None:
            continue
        due_ms = 1000 * float(backoff_s[min(delivery - 2, len(backoff_s) - 1)])
        late.append(float(pct["p99"]) - due_ms)
    return max(LATENESS_FLOOR_MS, max(late)) if late else None


def ratio(pocketmq: Measure, peer_value: float) -> float:
    """Above 1 when PocketMQ did better."""
    if pocketmq.higher_is_better:
        return pocketmq.value / peer_value
    return peer_value / pocketmq.value


def ratio_rows(records: Iterable[dict]) -> tuple[list[Row], list[str]]:
    """One row per PocketMQ measure, with each peer's best measure of the same workload; and the peers seen."""
    ours: list[Measure] = []
    best: dict[tuple[str, str], Measure] = {}  # (peer, workload) -> its best measure
    peers: list[str] = []
    for record in records:
        peer = record["peer"]
        for measure in measures(record):
            if peer == POCKETMQ:
                ours.append(measure)
                continue
            if peer not in peers:
                peers.append(peer)
            held = best.get((peer, measure.workload))
            if held is None or (measure.value > held.value) == measure.higher_is_better:
                best[(peer, measure.workload)] = measure
    rows = []
    for measure in ours:
        against: dict[str, tuple[float, float] | None] = {}
        for peer in peers:
            theirs = best.get((peer, measure.workload))
            against[peer] = None if theirs is None else (theirs.value, ratio(measure, theirs.value))
        rows.append(Row(measure, against))
    return rows, peers


def _figure(value: float, unit: str) -> str:
    return f"{value:,.0f} {unit}" if value >= 100 else f"{value:.1f} {unit}"


def format_table(rows: list[Row], peers: list[str]) -> str:
    """A markdown table: workload, PocketMQ's variant and figure, then each peer's best figure and the ratio."""
    head = ["workload", "PocketMQ", "PocketMQ figure"]
    for peer in peers:
        head += [peer, f"ratio to {peer}"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        m = row.pocketmq
        cells = [m.workload, m.variant or "-", _figure(m.value, m.unit)]
        for peer in peers:
            theirs = row.peers[peer]
            cells += ["-", "-"] if theirs is None else [_figure(theirs[0], m.unit), f"{theirs[1]:.2f}x"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def load_averages(records: Iterable[dict]) -> list[str]:
    """``peer: load1/load5/load15`` for each ``loadavg`` line (taken before each peer's run)."""
    out = []
    for record in records:
        if record["test"] == "loadavg":
            r = record.get("result", {})
            out.append(
                f"{record['peer']} {record.get('date', '')}: {r.get('load1')} / {r.get('load5')} / {r.get('load15')}"
            )
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(__doc__.rsplit("\n\n", 1)[-1].strip(), file=sys.stderr)
        return 2
    with open(args[0]) as f:
        records = read_lines(f)
    rows, peers = ratio_rows(records)
    if not rows:
        print(f"no PocketMQ results in {args[0]}", file=sys.stderr)
        return 1
    print("Load average (1 / 5 / 15 min) before each run: " + ("; ".join(load_averages(records)) or "not recorded"))
    print("A ratio above 1 means PocketMQ did better (more msg/s, or less latency); each peer at its best variant.\n")
    if not peers:
        print("(no peer results: PocketMQ's figures alone)\n")
    print(format_table(rows, peers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
