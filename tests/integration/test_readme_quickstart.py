"""The README's Python and CLI quickstarts run as written against a real broker (ports swapped for the test's)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from pocketmq.testing.processes import run_cli

README = Path(__file__).resolve().parents[2] / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_quickstart_block_runs(pocketmq_broker, index, tmp_path):
    """On the plugin's session broker (docs/testing.md): no other test sends to its topics `orders` and `events`."""
    code = python_blocks()[index].replace("127.0.0.1:9876", pocketmq_broker.namesrv_addr)
    code = code.replace("127.0.0.1:8081", pocketmq_broker.grpc_endpoint)
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**pocketmq_broker.process.env, "HOME": str(tmp_path)},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert b"order 1" in [m.body for m in pocketmq_broker.read("orders", 1)]


def cli_block() -> list[str]:
    """The command lines of the README's CLI quickstart."""
    section = README.read_text().split("### With the CLI", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, flags=re.S).group(1)
    return [line for line in block.splitlines() if line.strip()]


def test_cli_quickstart_runs(pocketmq_broker):
    lines = cli_block()
    assert lines and all(line.startswith("pocketmq ") for line in lines), lines
    for line in lines:
        argv = shlex.split(line)[1:]
        result = run_cli(*argv, namesrv=pocketmq_broker.namesrv_addr)
        assert result.returncode == 0, (line, result.stderr)
        if argv[0] == "tail":
            assert sorted(json.loads(m)["body"] for m in result.stdout.splitlines()) == [
                "hello-0",
                "hello-1",
                "hello-2",
            ]
