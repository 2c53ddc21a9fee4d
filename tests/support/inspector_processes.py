"""The inspector as a user runs it, for the inspector tests: a real process, its URL, a browser.

``running_inspector(*args)`` starts ``python -m modelctx.inspector ARGS --no-browser`` and
yields the URL it prints (with its token); the process is stopped (SIGTERM, then kill) at
the end. ``chromium_page()`` yields a Playwright page in Debian's headless Chromium.
``Screenshots`` numbers the shots of one test: ``inspector-NN-step.png``.
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
STARTUP_DEADLINE = 20.0


@contextmanager
def running_inspector(*args: str, cwd: Path | None = None) -> Iterator[str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "modelctx.inspector", *args, "--no-browser"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        start_new_session=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout or ()], daemon=True).start()
    try:
        try:
            first = lines.get(timeout=STARTUP_DEADLINE)
        except queue.Empty:
            pytest.fail(f"the inspector printed no URL within {STARTUP_DEADLINE}s")
        found = re.search(r"http://127\.0\.0\.1:\d+/[^/\s]+/", first)
        assert found, f"the inspector's first line names no URL: {first!r}"
        yield found.group(0)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(5)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def skip_without_chromium() -> None:
    if not Path(CHROMIUM).exists() or shutil.which(CHROMIUM) is None:
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")


@contextmanager
def chromium_page() -> Iterator[Any]:
    skip_without_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(15_000)
            yield page
        finally:
            browser.close()


class Screenshots:
    """Writes ``inspector-NN-step.png`` to ``$MODELCTX_SCREENSHOTS`` or the test's tmp dir."""

    def __init__(self, tmp_path: Path, prefix: str = "inspector") -> None:
        folder = os.environ.get("MODELCTX_SCREENSHOTS")
        self.folder = Path(folder) if folder else tmp_path
        self.folder.mkdir(parents=True, exist_ok=True)
        self.prefix = prefix
        self.count = 0

    def take(self, page: Any, step: str) -> Path:
        self.count += 1
        path = self.folder / f"{self.prefix}-{self.count:02d}-{step}.png"
        page.screenshot(path=str(path), full_page=True)
        assert path.stat().st_size > 0
        return path
