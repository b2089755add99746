"""``python -m pocketmq.cli.standby``: a ``pocketmq`` process started before it is needed, for test harnesses.

Importing the broker (grpc, protobuf, the official client's protocol modules, the broker services) takes about a
second of CPU, most of a cold ``pocketmq serve``'s start-up. A standby process pays it ahead: it imports what
``serve`` and ``namesrv`` need, then waits for one line on stdin, a JSON request ``{"argv": [...], "cwd": DIR,
"env": {...}, "log": PATH}``, and runs ``pocketmq <argv>`` in ``cwd`` with that environment, its stdout and
stderr appended to ``log``. ``pocketmq.testing.processes`` keeps one standby ahead of its next start.

Stdin stays open for the life of the process and is its tie to its parent: when it reaches end of file (the
parent closed it, or died, however it died: the kernel closes the parent's end of the pipe) the process stops
as on SIGTERM, so a test run that crashed leaves no broker behind. A standby never asked to run anything
exits at once on end of file.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading

# The slow imports, done while waiting: the modules ``pocketmq serve`` and ``pocketmq namesrv`` run on.
import pocketmq.cli.namesrv_cmd
import pocketmq.cli.serve_cmd
import pocketmq.server.grpc_server  # noqa: F401  (imported by serve only once it starts)
from pocketmq.cli.main import main

# After end of file a clean stop gets this long before the process ends itself (a stop that hangs must not keep
# a dead test run's broker alive).
ORPHAN_STOP_GRACE_S = 10.0
STDIN_FD = 0


def _read_request_line() -> bytes:
    """The first line of stdin, read from the descriptor itself: ``sys.stdin``'s buffer would keep a lock the
    watching thread's reads hold while the interpreter finalizes (a fatal error at exit)."""
    line = b""
    while not line.endswith(b"\n"):
        chunk = os.read(STDIN_FD, 1)
        if not chunk:
            break
        line += chunk
    return line


def _stop_when_parent_gone() -> None:
    """Block until stdin reaches end of file, then stop the process: SIGTERM (the commands' clean stop), and an
    exit without cleanup if that has not ended it within ``ORPHAN_STOP_GRACE_S``."""
    while os.read(STDIN_FD, 4096):
        pass
    os.kill(os.getpid(), signal.SIGTERM)
    threading.Event().wait(ORPHAN_STOP_GRACE_S)
    os._exit(1)


def _redirect_output(log_path: str) -> None:
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    for fd in (1, 2):
        os.dup2(log_fd, fd)
    os.close(log_fd)


def run_request(request: dict) -> int:
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    _redirect_output(request["log"])
    threading.Thread(target=_stop_when_parent_gone, name="parent-watch", daemon=True).start()
    return main(list(request["argv"]))


def standby() -> int:
    line = _read_request_line()
    if not line.strip():  # end of file: the parent went away, or never needed this one
        return 0
    return run_request(json.loads(line))


if __name__ == "__main__":
    sys.exit(standby())
