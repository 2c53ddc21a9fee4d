"""The documentation site builds without warnings, and every Python sample in it runs.

Each page's ```python blocks run in order in one fresh temporary directory, each as its
own ``python -`` process that must exit 0 within ``BLOCK_TIMEOUT`` seconds. A block after
``<!-- file: NAME -->`` is written to NAME in that directory instead (a server file a
later block starts; a JSON block may be named so too); a block after ``<!-- no-run: REASON -->`` is not run, and
``MAX_NO_RUN`` keeps such blocks rare. Samples reach only loopback.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.paths import DOCS, ROOT, SRC

BLOCK_TIMEOUT = 60.0
BUILD_TIMEOUT = 300.0
MAX_NO_RUN = 3
PAGE_TIMEOUT = 600.0

# A fence opening at the start of a line, optionally preceded by one directive comment.
_BLOCK = re.compile(
    r"(?:<!--\s*(?P<kind>file|no-run):\s*(?P<arg>.*?)\s*-->\s*\n)?^```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^```\s*$",
    re.MULTILINE | re.DOTALL,
)


@dataclass(frozen=True)
class Block:
    """One ```python block of a page: its line, its code and what to do with it."""

    line: int
    code: str
    file: str | None = None  # write to this name instead of running
    no_run: str | None = None  # the reason it is not run


def python_blocks(page: Path) -> list[Block]:
    """The page's ```python blocks in order, with their directives, and the blocks of any
    language that a ``file:`` directive names (a JSON configuration a sample reads)."""
    text = page.read_text("utf-8")
    blocks = []
    for match in _BLOCK.finditer(text):
        kind, arg = match.group("kind"), match.group("arg")
        if match.group("lang") != "python" and kind != "file":
            continue
        line = text.count("\n", 0, match.start("body"))
        blocks.append(
            Block(
                line=line,
                code=match.group("body"),
                file=arg if kind == "file" else None,
                no_run=arg if kind == "no-run" else None,
            )
        )
    return blocks


def pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def sample_env() -> dict[str, str]:
    """The reader's environment: this interpreter's ``python`` and ``modelctx`` first on
    PATH, the package under test importable, no proxy (samples reach only loopback)."""
    env = {k: v for k, v in os.environ.items() if k.lower() not in {"http_proxy", "https_proxy", "all_proxy"}}
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
    env["NO_PROXY"] = "127.0.0.1,localhost"
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        env.pop(key, None)  # a sample never spends a reader's model credits
    return env


def run_sample(code: str, workdir: Path, env: dict[str, str]) -> tuple[int | None, str]:
    """Run ``code`` as ``python -`` in ``workdir``, in its own process group; returns its
    exit status (None past ``BLOCK_TIMEOUT``) and its output. Whatever the sample started
    and left behind (a server it did not stop) is killed with the group."""
    # Files, not pipes: a child the sample leaves running would hold a pipe open.
    source, log = workdir / ".sample.py", workdir / ".sample.log"
    source.write_text(code, "utf-8")
    with source.open("rb") as stdin, log.open("wb") as stdout:
        process = subprocess.Popen(
            [sys.executable, "-"],
            stdin=stdin,
            stdout=stdout,
            stderr=subprocess.STDOUT,
            cwd=workdir,
            env=env,
            start_new_session=True,
        )
        try:
            returncode: int | None = process.wait(timeout=BLOCK_TIMEOUT)
        except subprocess.TimeoutExpired:
            returncode = None
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    output = log.read_text("utf-8", errors="replace")
    source.unlink()
    log.unlink()
    return returncode, output


def run_page(page: Path, workdir: Path) -> int:
    """Run ``page``'s blocks in order in ``workdir``; returns how many ran. A block that
    exits non-zero or outlives ``BLOCK_TIMEOUT`` fails the test, naming page and line."""
    env = sample_env()
    ran = 0
    for block in python_blocks(page):
        where = f"{page.name}:{block.line + 1}"
        if block.no_run is not None:
            assert block.no_run, f"{where}: a no-run block must say why"
            continue
        if block.file is not None:
            target = workdir / block.file
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.code, "utf-8")
            continue
        returncode, output = run_sample(block.code, workdir, env)
        if returncode is None:
            pytest.fail(f"{where}: the sample ran past {BLOCK_TIMEOUT:.0f} s\n{output}")
        if returncode != 0:
            pytest.fail(f"{where}: the sample exited {returncode}\n{output}")
        ran += 1
    return ran


# Each block has its own deadline (BLOCK_TIMEOUT); the page's is their sum, at most.
@pytest.mark.timeout(PAGE_TIMEOUT)
@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(DOCS)))
def test_every_python_sample_of_the_page_runs(page: Path, tmp_path: Path) -> None:
    run_page(page, tmp_path)


_PAGE = """\
Intro.

<!-- file: helper.py -->
```python
ANSWER = 42
```

```python
from helper import ANSWER
assert ANSWER == 42
```

<!-- no-run: needs a key -->
```python
raise SystemExit(1)
```

```json
{"not": "run"}
```
"""


def test_a_page_runs_its_blocks_in_order_with_files_written_and_no_run_skipped(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(_PAGE)
    blocks = python_blocks(page)
    assert [(b.file, b.no_run) for b in blocks] == [("helper.py", None), (None, None), (None, "needs a key")]
    workdir = tmp_path / "run"
    workdir.mkdir()
    assert run_page(page, workdir) == 1
    assert (workdir / "helper.py").read_text() == "ANSWER = 42\n"


def test_a_failing_sample_fails_the_page_naming_its_line(tmp_path: Path) -> None:
    page = tmp_path / "broken.md"
    page.write_text("# Broken\n\n```python\nprint('before')\nraise SystemExit('this sample is wrong')\n```\n")
    with pytest.raises(pytest.fail.Exception, match=r"broken.md:4: the sample exited 1[\s\S]*this sample is wrong"):
        run_page(page, tmp_path)


def test_samples_that_do_not_run_are_few_and_say_why() -> None:
    skipped = [(page, block) for page in pages() for block in python_blocks(page) if block.no_run is not None]
    assert len(skipped) <= MAX_NO_RUN, [f"{page.name}:{block.line} ({block.no_run})" for page, block in skipped]
    assert all(block.no_run for _, block in skipped)


def test_every_page_has_a_python_sample_or_is_reference() -> None:
    """A guide without a runnable sample cannot be checked; reference pages are generated."""
    guides = [p for p in pages() if p.parent.name in {"tutorial", "how-to"} and p.name not in _OTHERS]
    assert guides
    for page in guides:
        assert any(b.no_run is None and b.file is None for b in python_blocks(page)), page


# Pages other helpers write; they follow the same convention but are theirs to fill.
_OTHERS = {"inspector.md", "testing.md", "cli.md"}


@pytest.mark.timeout(BUILD_TIMEOUT + 30)
def test_the_site_builds_strictly_with_the_api_reference(tmp_path: Path) -> None:
    site = tmp_path / "site"
    env = {**sample_env(), "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(ROOT / "mkdocs.yml"),
            "-d",
            str(site),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "WARNING" not in result.stderr, result.stderr
    reference = site / "reference"
    for page, name in [
        ("client", "modelctx.client.Client"),
        ("server", "modelctx.server.Server"),
        ("server", "modelctx.server.Context"),
        ("host", "modelctx.host.Host"),
        ("auth", "modelctx.auth.ProtectedResource"),
        ("errors", "modelctx.errors.MCPError"),
        ("transports", "modelctx.transports.http"),
    ]:
        html = (reference / page / "index.html").read_text("utf-8")
        assert f'id="{name}"' in html, f"the API page {page} lacks {name}"


def test_samples_import_only_what_they_use_and_use_only_what_exists(tmp_path: Path) -> None:
    """Pyflakes' checks (ruff's F rules) over every sample: a reader copies these."""
    for page in pages():
        for number, block in enumerate(python_blocks(page)):
            if block.file is None or block.file.endswith(".py"):
                (tmp_path / f"{page.stem}_{number}_line{block.line + 1}.py").write_text(block.code, "utf-8")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "check",
            "--isolated",
            "--select",
            "F",
            "--output-format",
            "concise",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_process_a_sample_leaves_running_is_stopped_with_it(tmp_path: Path) -> None:
    code = (
        "import subprocess, sys\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        "print(child.pid)\n"
    )
    returncode, output = run_sample(code, tmp_path, sample_env())
    assert returncode == 0, output
    child = int(output.split()[0])
    deadline = time.monotonic() + 10
    while _alive(child):
        assert time.monotonic() < deadline, f"the sample's child {child} outlived it"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a process that has not exited (a zombie has)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
