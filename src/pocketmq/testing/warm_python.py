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

The server is ``python -m pocketmq.cli.warm_server SOCKET`` (it imports the CLI, a layer above this one).
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from pocketmq.testing.polling import wait_until

SERVER_MODULE = "pocketmq.cli.warm_server"
SERVER_START_TIMEOUT_S = 60.0  # its imports, on a loaded machine
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
            [sys.executable, "-m", SERVER_MODULE, str(self.socket_path)],
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
