"""Stage definitions of staged concurrency (docs/staged.md), shared by the push consumer's scheduler
(client/stages.py) and the broker's POP stage gate (broker/pop/stage_gate.py). Pure.

Stage definitions are stage sizes, e.g. ``[10, 20, 70]``: sequence numbers 0-9 are stage 0, 10-29 stage 1,
30-99 stage 2, and everything after the last stage one unbounded concurrent stage.
"""

from __future__ import annotations

import bisect
import itertools


def stage_end(definitions: list[int], stage_offset: int) -> float:
    """One past the last sequence number of the stage ``stage_offset`` is in (inf: the unbounded last stage)."""
    for end in itertools.accumulate(definitions):
        if stage_offset < end:
            return end
    return float("inf")


def stage_index(definitions: list[int], seq: int) -> int:
    """Which stage sequence number ``seq`` belongs to (``len(definitions)``: the unbounded last stage)."""
    return bisect.bisect_right(list(itertools.accumulate(definitions)), seq)


def check_definitions(definitions: list[int]) -> list[int]:
    if not isinstance(definitions, (list, tuple)) or any(
        not isinstance(size, int) or isinstance(size, bool) or size < 1 for size in definitions
    ):
        raise ValueError(f"stage sizes must be positive integers, got {definitions!r}")
    return list(definitions)
