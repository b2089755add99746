"""Whether this machine can run Spark: ``java`` on PATH, version 17 or newer (PySpark 4 needs it).

- ``java_problem()``: ``None`` when Java is usable, else one sentence saying what is wrong and how to fix it.
- ``java_required()``: whether a missing Java is an error rather than a reason to skip the Spark tests: in CI
  (``CI`` set to a true value, as CI services do) a machine without Java must not pass by skipping.
- ``python -m pocketmq.testing.java``: prints the problem and exits 1 (``make pipeline`` runs it first).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

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


def java_problem() -> str | None:
    java = shutil.which("java")
    if java is None:
        return f"java not found on PATH; {INSTALL_HINT}"
    try:
        done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{java} -version failed ({exc}); {INSTALL_HINT}"
    output = done.stderr + done.stdout
    major = java_major(output)
    if major is None or major < MIN_JAVA_MAJOR:
        first_line = output.strip().splitlines()[0] if output.strip() else "no version output"
        return f"{java} is too old or unknown ({first_line}); {INSTALL_HINT}"
    return None


def java_required() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


if __name__ == "__main__":
    problem = java_problem()
    if problem is not None:
        print(f"Spark needs Java {MIN_JAVA_MAJOR}+: {problem}", file=sys.stderr)
        sys.exit(1)
