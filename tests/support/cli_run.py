"""Running ``modelctx`` client commands as a user would: a real subprocess, its output
captured (so stdout and stderr are pipes, not terminals)."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from tests.support.wire import DEADLINE, SAMPLE_SERVER

#: The sample server on stdio, as --stdio takes it.
SAMPLE_STDIO = shlex.join([sys.executable, "-m", "modelctx", "serve", str(SAMPLE_SERVER)])


def modelctx(*args: str, stdin: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "modelctx", *args],
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=DEADLINE * 2,
        check=False,
        cwd=cwd,
    )


def sample(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``modelctx ARGS --stdio <the sample server>``."""
    return modelctx(*args, "--stdio", SAMPLE_STDIO, stdin=stdin)


def one_line_error(result: subprocess.CompletedProcess[str], status: int, *fragments: str) -> str:
    """The single ``modelctx: ...`` line a failed command printed, checked."""
    assert result.returncode == status, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("modelctx: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]
