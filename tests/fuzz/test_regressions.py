"""Every input the coverage-guided fuzzer found a crash with, run again (issue 7, Fuzzing).

``fuzz/regressions/<target>-<what>`` holds the input; the test feeds it to the same target
function ``fuzz/run.py`` fuzzes. And a short fuzz run of every target, so the harness
itself keeps working under the README's test command (CI runs the long one).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import FUZZ

REGRESSIONS = sorted((FUZZ / "regressions").iterdir())


@pytest.mark.parametrize("found", REGRESSIONS, ids=[path.name for path in REGRESSIONS])
def test_an_input_the_fuzzer_once_crashed_on_is_handled(found: Path) -> None:
    sys.path.insert(0, str(FUZZ))
    try:
        from targets import TARGETS
    finally:
        sys.path.remove(str(FUZZ))
    target = TARGETS[next(name for name in TARGETS if found.name.startswith(name + "-"))]
    target(found.read_bytes())  # raises on a regression


def test_every_fuzz_target_runs_a_short_while_without_a_finding() -> None:
    done = subprocess.run(
        [sys.executable, str(FUZZ / "run.py"), "--runs", "500"],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "all targets" in done.stdout
