"""Whether this machine can run Spark: ``java`` on PATH, version 17 or newer (PySpark 4 needs it).

- ``java_problem()``: ``None`` when Java is usable, else one sentence saying what is wrong and how to fix it.
- ``java_required()``: whether a missing Java is an error rather than a reason to skip the Spark tests: in CI
  (``CI`` set to a true value, as CI services do) a machine without Java must not pass by skipping.
  The check itself is ``pocketmq.testing.tools``, shared with etcd for the failover tests.
- ``python -m pocketmq.testing.java``: prints the problem and exits 1 (``make pipeline`` runs it first).
"""

from __future__ import annotations

import re

from pocketmq.testing.tools import Tool, exit_on_problem, tool_problem, tool_required

MIN_JAVA_MAJOR = 17
INSTALL_HINT = "install Java 17+ (Debian: apt-get install openjdk-17-jre-headless) and put java on PATH"
# `java -version` prints e.g. `openjdk version "17.0.15" 2025-04-15` or, before Java 9, `java version "1.8.0_402"`.
_VERSION = re.compile(r'version "(\d+)(?:\.(\d+))?')


def java_major(version_output: str) -> int | None:
    """The major version in ``java -version`` output, ``None`` when it names none."""
    match = _VERSION.search(version_output)
    if match is None:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


JAVA = Tool(
    "java", "-version", java_major, lambda major: major >= MIN_JAVA_MAJOR, "is too old or unknown", INSTALL_HINT
)


def java_problem() -> str | None:
    return tool_problem(JAVA)


def java_required() -> bool:
    return tool_required()


if __name__ == "__main__":
    exit_on_problem(JAVA, f"Spark needs Java {MIN_JAVA_MAJOR}+")
