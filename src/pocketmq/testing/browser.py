"""A headless Chromium for the web console's browser tests (docs/console.md), driven by Selenium.

- ``browser_problem()``: ``None`` when Selenium imports and ``chromium`` and ``chromedriver`` are on PATH with the
  same major version (a driver drives only its own browser), else one sentence saying what is wrong and how to
  fix it (the checks of ``pocketmq.testing.tools``, as for Java and etcd).
- ``browser_required()``: in CI (``CI`` set to a true value) a missing browser is an error, not a reason to skip:
  the same rule as Java for the Spark tests and etcd for the failover tests.
- ``browser_or_skip()``: what a fixture calls first: skips the test (fails it in CI) when the browser is missing.
- ``headless_browser()``: a context manager giving a started headless Chromium (Selenium ``WebDriver``), quit at
  the end. Starting one takes seconds: a test module shares one.
- ``send_header(driver, name, value)``: every later request of the browser carries that header (``None``: no
  extra headers), e.g. the ``Authorization`` of a console login, which a headless browser cannot type into a box.
- ``screenshot(driver, name)``: saves the page as ``NAME.png`` in the folder ``POCKETMQ_SCREENSHOTS`` names, and
  does nothing when it is unset (a normal test run does not rewrite the pictures docs/ shows).
- ``python -m pocketmq.testing.browser``: prints the problem and exits 1 (``make browser`` runs it).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from pocketmq.testing.tools import Tool, skip_or_fail, tool_problem, tool_required

if TYPE_CHECKING:
    from selenium.webdriver.chrome.webdriver import WebDriver

NEEDED_BY = "the browser tests need a headless Chromium"
INSTALL_HINT = "install Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)"
SELENIUM_HINT = "install the test extra (pip install -e '.[test]')"
SCREENSHOTS_ENV = "POCKETMQ_SCREENSHOTS"
MIN_CHROMIUM_MAJOR = 109  # the first with the new headless mode (--headless=new)
WINDOW_SIZE = "1280,900"
# `chromium --version`: "Chromium 156.0.8078.108 built on Debian ..."; `chromedriver --version`: "ChromeDriver 156.0..."
_MAJOR = re.compile(r"(?:Chromium|Chrome|ChromeDriver) (\d+)\.")


def major_version(version_output: str) -> int | None:
    match = _MAJOR.search(version_output)
    return int(match.group(1)) if match else None


CHROMIUM = Tool("chromium", "--version", major_version, lambda major: major >= MIN_CHROMIUM_MAJOR,
                f"is older than {MIN_CHROMIUM_MAJOR} or unknown", INSTALL_HINT)  # fmt: skip
CHROMEDRIVER = Tool("chromedriver", "--version", major_version, lambda major: major >= MIN_CHROMIUM_MAJOR,
                    f"is older than {MIN_CHROMIUM_MAJOR} or unknown", INSTALL_HINT)  # fmt: skip


def _major(tool: Tool) -> int | None:
    """The major version of a tool ``tool_problem`` found usable."""
    done = subprocess.run([tool.command, tool.version_flag], capture_output=True, text=True, timeout=30)
    return tool.major_of(done.stdout)


def browser_problem() -> str | None:
    if importlib.util.find_spec("selenium") is None:
        return f"selenium is not installed; {SELENIUM_HINT}"
    problem = tool_problem(CHROMIUM) or tool_problem(CHROMEDRIVER)
    if problem is not None:
        return problem
    browser_major, driver_major = _major(CHROMIUM), _major(CHROMEDRIVER)
    if browser_major != driver_major:
        return f"chromedriver is version {driver_major} but chromium is {browser_major}; {INSTALL_HINT} of one release"
    return None


def browser_required() -> bool:
    """Whether a missing browser fails the tests that need it (CI), rather than skipping them."""
    return tool_required()


def browser_or_skip() -> None:
    """Skip the calling test when the browser is missing; in CI, fail it."""
    skip_or_fail(browser_problem(), NEEDED_BY)


@contextmanager
def headless_browser() -> Iterator[WebDriver]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    # --no-sandbox: tests run as root in containers, where Chromium's sandbox cannot start;
    # --disable-dev-shm-usage: a container's /dev/shm is often too small for a renderer
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(arg)
    options.add_argument(f"--window-size={WINDOW_SIZE}")
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "chromedriver"), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def send_header(driver: WebDriver, name: str, value: str | None) -> None:
    driver.execute_cdp_cmd("Network.enable", {})
    headers = {} if value is None else {name: value}
    driver.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": headers})


def screenshot(driver: WebDriver, name: str) -> Path | None:
    folder = os.environ.get(SCREENSHOTS_ENV)
    if not folder:
        return None
    path = Path(folder) / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(path))
    return path


if __name__ == "__main__":
    problem = browser_problem()
    if problem is not None:
        print(f"{NEEDED_BY}: {problem}", file=sys.stderr)
        sys.exit(1)
