"""``python -m pocketmq.testing.chaos --seed S`` replays one seed's schedule against real processes;
``--seeds N [--first F]`` runs N seeds (``make chaos``). Exit status 1 when any run fails; every failing run
prints its schedule, findings, logs directory and replay command. ``--print-schedule`` only prints the
schedule of ``--seed``."""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path

from pocketmq.testing.chaos.runner import run_schedule
from pocketmq.testing.chaos.schedule import ALL_KINDS, FaultKind, generate


def _kinds(text: str) -> frozenset[FaultKind]:
    try:
        return frozenset(FaultKind(k.strip()) for k in text.split(",") if k.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"kinds are {', '.join(k.value for k in FaultKind)}; got {text!r}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pocketmq.testing.chaos", description=__doc__)
    parser.add_argument("--seed", type=int, help="run this one seed")
    parser.add_argument("--seeds", type=int, default=2, help="how many seeds to run (default 2)")
    parser.add_argument("--first", type=int, default=0, help="the first seed of --seeds")
    parser.add_argument("--duration", type=float, default=45.0, help="seconds of faults and traffic (default 45)")
    parser.add_argument(
        "--settle", type=float, default=45.0, help="at most this long to drain after healing (default 45)"
    )
    parser.add_argument("--kinds", type=_kinds, default=ALL_KINDS, help="comma-separated fault kinds (default all)")
    parser.add_argument("--workdir", type=Path, help="where runs keep their data and logs (default: a temp dir)")
    parser.add_argument("--print-schedule", action="store_true", help="with --seed: print the schedule and exit")
    args = parser.parse_args(argv)
    if args.duration < 3:
        parser.error("--duration must be at least 3 seconds")
    logging.basicConfig(level=logging.WARNING)
    seeds = [args.seed] if args.seed is not None else list(range(args.first, args.first + args.seeds))
    if args.print_schedule:
        for seed in seeds:
            print(generate(seed, args.duration, kinds=args.kinds).describe())
        return 0
    root = args.workdir or Path(tempfile.mkdtemp(prefix="pocketmq-chaos-"))
    started = time.monotonic()
    failed = []
    for seed in seeds:
        result = run_schedule(
            generate(seed, args.duration, kinds=args.kinds), root / f"seed-{seed}", settle_s=args.settle
        )
        print(result.report(), flush=True)
        if not result.ok:
            failed.append(result)
    print(
        f"chaos: {len(seeds)} seeds, {len(failed)} failed, {time.monotonic() - started:.0f} s, runs in {root}"
        + (f"; replay one with: {failed[0].replay}" if failed else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
