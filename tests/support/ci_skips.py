"""Under CI a skipped test is a failure; elsewhere it stays a skip.

Hooked into the suite by ``tests/conftest.py``. Self-contained (pytest and os only):
``tests/test_ci_skips.py`` copies this file as the ``conftest.py`` of a small suite.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any

import pytest


# A skipped test is a failure under CI.
# A suite that skips where it should run (a missing spec folder, an npm package not
# installed) hides its tests as quietly as a deleted file would. Under CI (``CI`` set, as
# .ci/run and every hosted CI does) each skip is reported as a failure naming its reason.
# Expected failures (xfail) are not skips and are left alone.
def _skips_fail() -> bool:
    return bool(os.environ.get("CI"))


def _fail_the_skip(report: pytest.CollectReport | pytest.TestReport) -> None:
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    report.outcome = "failed"
    report.longrepr = (
        f"skipped under CI ({reason}); with CI set every test must run: install what it needs "
        "(scripts/test.sh) or remove the test"
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if _skips_fail() and report.skipped and not hasattr(report, "wasxfail"):
        _fail_the_skip(report)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if _skips_fail() and report.skipped:
        _fail_the_skip(report)
