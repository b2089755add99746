"""``python -m pocketmq.testing.sim --seed S`` replays one run; ``--seeds N [--first F]`` runs N seeds and
prints a summary line (``make sim SEEDS=N``). Exit status 1 when any seed fails."""

from __future__ import annotations

import argparse
import logging
import sys
import time

from pocketmq.testing.sim.config import BUGS, Bugs, SimConfig
from pocketmq.testing.sim.scenario import run_seed


def _range(text: str) -> tuple[int, int]:
    low, _, high = text.partition(",")
    try:
        low_ms, high_ms = int(low), int(high)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LO,HI in ms, got {text!r}") from None
    if not 0 < low_ms <= high_ms:
        raise argparse.ArgumentTypeError(f"expected 0 < LO <= HI, got {text!r}")
    return low_ms, high_ms


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pocketmq.testing.sim", description=__doc__)
    parser.add_argument("--seed", type=int, help="run this one seed and print its report")
    parser.add_argument("--seeds", type=int, default=100, help="how many seeds to run (default 100)")
    parser.add_argument("--first", type=int, default=0, help="the first seed of --seeds")
    parser.add_argument("--bug", action="append", default=[], choices=BUGS, help="inject a known bug")
    parser.add_argument(
        "--flush-latency-ms",
        type=_range,
        default=SimConfig().flush_latency_ms,
        metavar="LO,HI",
        help="how long a flush takes (default 1,4: an fsync); 50,400 is the window of ASYNC_FLUSH",
    )
    parser.add_argument("--trace", action="store_true", help="with --seed: print every event of the trace")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.CRITICAL)  # breaker changes are in the trace; keep the output to reports
    bugs = Bugs(frozenset(args.bug))
    config = SimConfig(flush_latency_ms=args.flush_latency_ms)
    if args.seed is not None:
        result = run_seed(args.seed, config, bugs)
        if args.trace:
            for t, kind, fields in result.history.events:
                print(f"{t:>7} {kind} {fields}")
        print(result.report())
        return 0 if result.ok else 1
    started = time.monotonic()
    failed = []
    for seed in range(args.first, args.first + args.seeds):
        result = run_seed(seed, config, bugs)
        if not result.ok:
            failed.append(result)
            print(result.report())
    elapsed_s = time.monotonic() - started
    print(
        f"sim: {args.seeds} seeds from {args.first}, {len(failed)} failed, {elapsed_s:.1f} s"
        + (f"; replay one with: {failed[0].replay}" if failed else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
