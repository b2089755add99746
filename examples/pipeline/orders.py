"""The order events of the example pipeline: generated from a seed, so the checker can recompute them.

An event is JSON ``{"order_id": N, "customer": "c7", "amount_cents": 1234, "event_time_ms": T}``. Event
times advance 250 ms per order from a fixed epoch, so orders fall into 10-second windows deterministically.
"""

from __future__ import annotations

import json
import random
from collections import Counter

EPOCH_MS = 1_700_000_000_000
EVENT_STEP_MS = 250
WINDOW_MS = 10_000
CUSTOMERS = 8


def order(n: int, seed: int = 7) -> dict:
    rng = random.Random(seed * 1_000_003 + n)
    return {
        "order_id": n,
        "customer": f"c{rng.randrange(CUSTOMERS)}",
        "amount_cents": rng.randrange(100, 10_000),
        "event_time_ms": EPOCH_MS + n * EVENT_STEP_MS,
    }


def encode(event: dict) -> bytes:
    return json.dumps(event, separators=(",", ":")).encode()


def expected_totals(count: int, closed_before_ms: int) -> dict[tuple[str, int], tuple[int, int]]:
    """(customer, window start ms) -> (total cents, orders) of the first ``count`` orders, for windows that
    end at or before ``closed_before_ms`` (the ones a watermark has closed)."""
    totals: Counter = Counter()
    orders: Counter = Counter()
    for n in range(count):
        event = order(n)
        start = event["event_time_ms"] - event["event_time_ms"] % WINDOW_MS
        if start + WINDOW_MS <= closed_before_ms:
            totals[(event["customer"], start)] += event["amount_cents"]
            orders[(event["customer"], start)] += 1
    return {key: (totals[key], orders[key]) for key in totals}
