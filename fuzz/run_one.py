"""Run one fuzz target under atheris: ``python fuzz/run_one.py TARGET [libFuzzer flags]``."""

from __future__ import annotations

import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).parent))
from targets import TARGETS  # noqa: E402

if __name__ == "__main__":
    target = TARGETS[sys.argv.pop(1)]
    atheris.Setup(sys.argv, target)
    atheris.Fuzz()
