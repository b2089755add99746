"""How long a test waits for its broker: ``embedded_broker()`` from the call to a broker ready for clients.

Setups, in one run:

- ``cold``: a broker started in a new interpreter that imports the broker first (no standby warmed: what every
  start cost before standbys);
- ``warm``: a broker started from a standby that finished its imports (``pocketmq.testing.standby``), as the
  pytest plugin's fixtures start them after the first, and the first too once collection has prewarmed one.

Each start is followed by a clean stop; the standby for the next start warms while nothing else runs (the
benchmark waits until it has imported, as a test would have run in the meantime). Prints one JSON line per
setup: the median and the worst start in seconds, and the median clean stop.

    python bench/embedded_start.py [--starts 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from pocketmq.testing.embedded import start_embedded_broker
from pocketmq.testing.polling import wait_until
from pocketmq.testing.standby import STANDBYS, StandbyPool

IMPORTED_TIMEOUT_S = 60.0


def standby_imported(pool: StandbyPool) -> bool:
    """Whether the standby kept ahead has finished its imports: it then sleeps in a read of stdin."""
    proc = pool._next
    if proc is None:
        return False
    try:
        stat = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        wchan = Path(f"/proc/{proc.pid}/wchan").read_text()
    except OSError:
        return False
    return stat[0] == "S" and "pipe" in wchan


def time_starts(starts: int, root: Path, *, warm: bool) -> dict:
    start_s: list[float] = []
    stop_s: list[float] = []
    for i in range(starts):
        if warm:
            STANDBYS.prewarm()
            wait_until(lambda: standby_imported(STANDBYS), IMPORTED_TIMEOUT_S, "standby imported")
        else:
            STANDBYS.close()  # no standby ahead: the start spawns a new interpreter
        began = time.monotonic()
        broker = start_embedded_broker(root / f"{'warm' if warm else 'cold'}-{i}")
        start_s.append(time.monotonic() - began)
        began = time.monotonic()
        broker.stop()
        stop_s.append(time.monotonic() - began)
        if not warm:
            STANDBYS.close()  # the standby started once the broker was ready would make the next start warm
    return {
        "setup": "warm" if warm else "cold",
        "starts": starts,
        "start_median_s": round(statistics.median(start_s), 3),
        "start_max_s": round(max(start_s), 3),
        "stop_median_s": round(statistics.median(stop_s), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pocketmq-bench-") as tmp:
        for warm in (False, True):
            print(json.dumps(time_starts(args.starts, Path(tmp), warm=warm)), flush=True)


if __name__ == "__main__":
    main()
