"""``python -m pocketmq.cli.warm_server SOCKET``: the server of ``pocketmq.testing.warm_python`` (read that module
first). It imports the CLI's client commands and the official client once, listens on the Unix socket ``SOCKET``
and forks a child per request of a launcher: the child takes the launcher's stdin, stdout, stderr, working
directory, environment and argv, runs ``pocketmq ARGV`` or ``python ARGV`` (``-c CODE`` or ``SCRIPT ARGS``) and
ends as an interpreter would; the server sends the launcher its exit code. The server stops at end of file on its
stdin (the process that started it ended), its children with it.
"""

from __future__ import annotations

import atexit
import ctypes
import importlib
import json
import os
import runpy
import signal
import socket
import sys
import threading
import traceback

MAX_REQUEST_BYTES = 1 << 20
# servers: the tests run them in processes of their own, and the broker's imports would double the server's start
LONG_RUNNING_COMMANDS = {"serve", "namesrv", "proxy"}


def stop_when_parent_gone() -> None:
    """Block until stdin reaches end of file (the starting process closed it or ended), then end the server."""
    while os.read(0, 4096):
        pass
    os._exit(0)


def serve(socket_path: str) -> None:
    import rocketmq  # noqa: F401  (the imports every command would pay for)

    import pocketmq.client  # noqa: F401
    from pocketmq.cli.main import COMMAND_MODULES, command_of

    for module in COMMAND_MODULES:
        if command_of(module) not in LONG_RUNNING_COMMANDS:
            importlib.import_module(module)

    threading.Thread(target=stop_when_parent_gone, daemon=True).start()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    server.bind(socket_path + ".tmp")
    server.listen()
    os.rename(socket_path + ".tmp", socket_path)  # the launchers connect only once it listens
    while True:
        conn, _ = server.accept()
        message, fds, _, _ = socket.recv_fds(conn, MAX_REQUEST_BYTES, 3)
        pid = os.fork()
        if pid == 0:
            server.close()
            conn.close()
            run_child(json.loads(message), fds)  # never returns
        for fd in fds:
            os.close(fd)
        threading.Thread(target=report_exit, args=(pid, conn), daemon=True).start()


def report_exit(pid: int, conn: socket.socket) -> None:
    _, status = os.waitpid(pid, 0)
    conn.send(str(os.waitstatus_to_exitcode(status) % 256).encode())
    conn.close()


def run_child(request: dict, fds: list[int]) -> None:
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with the server
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    if request["mode"] == "pocketmq":
        from pocketmq.cli.main import main

        sys.argv = ["pocketmq", *request["argv"]]
        exit_like_python(lambda: main(request["argv"]))
    match request["argv"]:
        case ["-c", code, *args]:
            sys.argv = ["-c", *args]
            sys.path[0] = ""  # as ``python -c`` puts it first
            exit_like_python(lambda: exec(compile(code, "<string>", "exec"), {"__name__": "__main__"}))
        case [script, *args]:
            sys.argv = [script, *args]
            sys.path[0] = os.path.dirname(os.path.abspath(script))  # as ``python SCRIPT`` puts it first
            exit_like_python(lambda: runpy.run_path(script, run_name="__main__") and None)  # its globals: no code


def exit_like_python(run) -> None:
    """Run, then end as an interpreter does (its exit code, a traceback, non-daemon threads joined, atexit run,
    buffers flushed) but without its finalization of every module the server imported, seconds on a busy
    machine."""
    try:
        code = run() or 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        if not isinstance(exc.code, int | None):
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]  # private: exit joins non-daemon threads first
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    serve(sys.argv[1])
