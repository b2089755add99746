"""A Python that imported the CLI and the clients once and forks a child per command: the tests run many short
``pocketmq`` commands, official-client scripts and docs snippets, and a cold start of each spends a second and more
importing (several on a loaded machine).

``WarmPython(bin_dir, env)`` starts the server; ``wait_ready()`` writes two launchers into ``bin_dir``: ``pocketmq``
(the CLI) and ``warm-python`` (``-c CODE``, or ``SCRIPT ARGS...``). A launcher is a small Python without
site-packages that hands its argv, working directory, environment and its stdin, stdout and stderr to the server,
which forks a child to run the command with them, and exits with the child's exit code. A child runs to a normal
interpreter exit (threads joined, atexit run, buffers flushed); it is killed when the server dies, and the server
stops when the process that started it ends (end of file on its stdin), however it ends.

What the server imported stays as imported: the official client's log file is under the HOME of the server's
start, not of the command's. A command to be signalled (killed, paused) needs a process of its own: a signal to
the launcher does not reach the child.

``shared_warm_python()``: one server for the test process, started on first use (``run_cli`` runs the CLI there).

Run as a module, this is the server: ``python -m pocketmq.testing.warm_python SOCKET``.
"""

from __future__ import annotations

import atexit
import ctypes
import importlib
import json
import os
import runpy
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import traceback
from pathlib import Path

from pocketmq.testing.polling import wait_until

MAX_REQUEST_BYTES = 1 << 20
SERVER_START_TIMEOUT_S = 60.0  # its imports, on a loaded machine
# servers: the docs never run them here, and the broker's imports would double the server's start
LONG_RUNNING_COMMANDS = {"serve", "namesrv", "proxy"}
LAUNCHER = """#!{python} -S
import json, os, socket, sys
sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
sock.connect({socket_path!r})
request = {{"mode": os.path.basename(sys.argv[0]), "argv": sys.argv[1:], "cwd": os.getcwd(), "env": dict(os.environ)}}
socket.send_fds(sock, [json.dumps(request).encode()], [0, 1, 2])
sys.exit(int(sock.recv(16) or b"255"))
"""


class WarmPython:
    """``start`` returns at once (the server imports while the caller starts a broker); ``wait_ready`` writes the
    launchers once the server listens."""

    def __init__(self, bin_dir: Path, env: dict[str, str]):
        self.bin_dir = bin_dir
        self.socket_path = bin_dir / "warm.sock"
        # the pipe on stdin is the tie to this process: the server stops at its end of file
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pocketmq.testing.warm_python", str(self.socket_path)],
            env=env,
            stdin=subprocess.PIPE,
        )

    def wait_ready(self) -> None:
        ready = wait_until(
            lambda: self.socket_path.exists() or self.process.poll() is not None, SERVER_START_TIMEOUT_S, "warm python"
        )
        assert ready and self.process.poll() is None, f"the warm python exited {self.process.returncode}"
        for name in ("pocketmq", "warm-python"):
            launcher = self.bin_dir / name
            launcher.write_text(LAUNCHER.format(python=sys.executable, socket_path=str(self.socket_path)))
            launcher.chmod(0o755)

    def stop(self) -> None:
        self.process.kill()  # its children die with it (PR_SET_PDEATHSIG)
        self.process.wait()
        if self.process.stdin is not None:
            self.process.stdin.close()


_shared: WarmPython | None = None
_shared_lock = threading.Lock()


def shared_warm_python() -> WarmPython:
    """The warm Python of this process, started (and waited for) on the first call, stopped at exit."""
    global _shared
    with _shared_lock:
        if _shared is None:
            bin_dir = Path(tempfile.mkdtemp(prefix="pocketmq-warm-"))
            # the official client's logs go under the HOME of the server's start (see the module's docstring)
            warm = WarmPython(bin_dir, dict(os.environ, HOME=str(bin_dir)))
            atexit.register(shutil.rmtree, bin_dir, ignore_errors=True)
            atexit.register(warm.stop)
            warm.wait_ready()
            _shared = warm
        return _shared


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
