"""``pocketmq store verify --data-dir DIR``: check every record of a stopped broker's store.

Prints one line per corrupt stretch of the commit log (its phys offset, length, the check that failed and the
queue records that point into it, which consumers will find skipped), one per hole (a slave's stand-in for
records its master's copy of was corrupt: valid, but those records are lost here), then a summary. Exit status 0 when
everything verifies, 1 when anything is corrupt (2 for usage errors, as every command). Reads only: it changes
nothing in the store. Logic: ``pocketmq.store.verify``.
"""

from __future__ import annotations

import argparse

from pocketmq.store.hole import slots_text
from pocketmq.store.verify import verify_store

_RECORDS_SHOWN = 10  # per corrupt stretch; the rest are counted


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "store", help="inspect a broker's store on disk", description="Offline tools for a stopped broker's store."
    )
    sub = parser.add_subparsers(dest="store_command", metavar="ACTION", required=True)
    verify = sub.add_parser(
        "verify",
        help="check the CRC32C and layout of every record",
        description="Check every record of the store's commit log (CRC32C, size, layout) "
        "and list what is corrupt. Exit status 1 when anything is.",
    )
    verify.add_argument("--data-dir", required=True, metavar="DIR", help="the broker's data directory")
    verify.set_defaults(func=run_verify)


def run_verify(args: argparse.Namespace) -> int:
    result = verify_store(args.data_dir)
    corrupt_bytes = 0
    for region in result.bad_regions:
        corrupt_bytes += region.length
        records = result.records_hit.get(region.phys_offset, [])
        shown = " ".join(f"{r.topic}/{r.queue_id}@{r.queue_offset}" for r in records[:_RECORDS_SHOWN])
        more = f" (+{len(records) - _RECORDS_SHOWN} more)" if len(records) > _RECORDS_SHOWN else ""
        print(
            f"corrupt phys_offset={region.phys_offset} bytes={region.length} reason={region.reason} "
            f"records={shown or '-'}{more}"
        )
    for hole in result.holes:
        print(f"hole phys_offset={hole.phys_offset} bytes={hole.size} records={slots_text(hole.hole)}")
    verdict = "CORRUPT" if result.corrupt else "OK"
    print(
        f"store verify {verdict}: {result.segments} commit log segment(s), {result.records_ok} record(s) ok, "
        f"{len(result.bad_regions)} corrupt stretch(es), {corrupt_bytes} corrupt byte(s), "
        f"{len(result.holes)} hole(s)"
    )
    return 1 if result.corrupt else 0
