"""Under CI a skipped test fails the run; elsewhere it stays a skip.

The hook lives in tests/support/ci_skips.py (tests/conftest.py hooks it in). These tests copy
it next to a small suite that skips in every way pytest offers and run that suite in a real
pytest subprocess.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.paths import TESTS

SKIPPING_SUITE = {
    "test_skips.py": '''
import pytest

def test_skips_in_the_body():
    pytest.skip("the tool is not installed")

@pytest.mark.skipif(True, reason="marked to skip")
def test_marked_skip():
    pass

@pytest.mark.xfail(reason="known bug", strict=True)
def test_expected_failure():
    assert False

def test_runs():
    assert True
''',
    "test_module_skip.py": '''
import pytest
pytest.skip("the spec folder is missing", allow_module_level=True)

def test_never_collected():
    pass
''',
}


def run_suite(tmp_path: Path, name: str, ci: bool) -> subprocess.CompletedProcess[str]:
    shutil.copy(TESTS / "support" / "ci_skips.py", tmp_path / "conftest.py")
    (tmp_path / name).write_text(SKIPPING_SUITE[name])
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci:
        env["CI"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", name],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_under_ci_a_skipped_test_is_a_failure_that_names_its_reason(tmp_path):
    result = run_suite(tmp_path, "test_skips.py", ci=True)
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert "skipped under CI (Skipped: the tool is not installed)" in out, out
    assert "skipped under CI (Skipped: marked to skip)" in out, out
    # A skip in the body fails the test; a skip mark fails its setup (an error).
    assert "1 failed, 1 passed, 1 xfailed, 1 error" in out, out


def test_under_ci_a_module_level_skip_stops_the_run_with_its_reason(tmp_path):
    result = run_suite(tmp_path, "test_module_skip.py", ci=True)
    out = result.stdout
    assert result.returncode != 0, out + result.stderr
    assert "skipped under CI (Skipped: the spec folder is missing)" in out, out


def test_without_ci_a_skip_stays_a_skip(tmp_path):
    result = run_suite(tmp_path, "test_skips.py", ci=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed, 2 skipped, 1 xfailed" in result.stdout, result.stdout
