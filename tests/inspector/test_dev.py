"""`modelctx dev FILE`: the inspector on a server file, restarted when the file changes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.inspector_processes import Screenshots, chromium_page, running_inspector

FIRST = '''
from modelctx import Server

server = Server("dev-demo", version="1")


@server.tool
def hello() -> str:
    """Say hello."""
    return "hello"
'''

SECOND = (
    FIRST.replace('version="1"', 'version="2"')
    + '''

@server.tool
def goodbye() -> str:
    """Say goodbye (added while the inspector was open)."""
    return "goodbye"
'''
)


@pytest.fixture
def page() -> Any:
    with chromium_page() as page:
        yield page


def test_dev_restarts_the_server_when_its_file_changes_and_the_page_follows(page: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    shots = Screenshots(tmp_path, prefix="inspector-dev")
    served = tmp_path / "project" / "server.py"
    served.parent.mkdir()
    served.write_text(FIRST)
    with running_inspector("dev", str(served)) as url:
        page.goto(url)
        expect(page.locator("#status")).to_have_text("connected")
        expect(page.locator('dd[data-row="Server"]')).to_have_text("dev-demo 1")
        expect(page.locator("#tools button")).to_have_count(1)
        shots.take(page, "before-edit")

        served.write_text(SECOND)
        expect(page.locator('dd[data-row="Server"]')).to_have_text("dev-demo 2", timeout=30_000)
        expect(page.locator('#tools button[data-key="goodbye"]')).to_be_visible()
        page.locator('#tools button[data-key="goodbye"]').click()
        page.locator("#call").click()
        expect(page.locator("#result pre.text")).to_have_text("goodbye")
        shots.take(page, "after-edit")


def test_dev_refuses_a_file_that_does_not_exist(tmp_path: Path) -> None:
    import subprocess
    import sys

    missing = subprocess.run(
        [sys.executable, "-m", "modelctx.inspector", "dev", str(tmp_path / "nope.py")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert missing.returncode == 2
    assert "does not exist" in missing.stderr
