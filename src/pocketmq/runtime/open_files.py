"""The process's open-file limit, raised to what the system allows at start (as the JVM does for RocketMQ by
default): every connection is a descriptor, and the usual soft limit of 1,024 is below the connection caps."""

from __future__ import annotations

import logging
import resource

log = logging.getLogger(__name__)

# Descriptors the broker needs besides connections: store segments, indexes, metadata files, sockets of its own.
RESERVED_FILES = 256


def raise_open_files_limit(max_connections: int) -> int:
    """Raise the soft RLIMIT_NOFILE to the hard one; warn when ``max_connections`` cannot fit. Returns the limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        wanted = max_connections + RESERVED_FILES if hard == resource.RLIM_INFINITY else hard
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError) as exc:
            log.warning("event=open_files_limit_not_raised soft=%d hard=%d reason=%s", soft, hard, exc)
    if max_connections + RESERVED_FILES > soft:
        log.warning(
            "event=open_files_limit_below_connection_cap open_files=%d max_connections=%d: accepting "
            "pauses when descriptors run out (docs/limits.md)",
            soft,
            max_connections,
        )
    return soft
