"""The ``modelctx install`` Click command (``install_command``)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any

import click

from . import HOSTS, InstallError, InstallUsageError, install

__all__ = ["install_command"]

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _env_pair(text: str, where: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not _ENV_NAME.match(key):
        raise click.BadParameter(f"{text!r} is not KEY=VALUE (KEY: letters, digits, _)", param_hint=where)
    return key, value


_MAX_ENV_FILE = 1024 * 1024  # a .env file is small; more is a mistake (or /dev/zero)


def _env_file_text(path: Path) -> str:
    """The text of a regular file of at most ``_MAX_ENV_FILE`` bytes. Opened non-blocking,
    so a FIFO is refused instead of waited on."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise click.BadParameter(f"cannot read {path}: {exc.strerror or exc}", param_hint="--env-file") from None
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise click.BadParameter(f"{path} is not a regular file; give a .env file", param_hint="--env-file")
        data = file.read(_MAX_ENV_FILE + 1)
    if len(data) > _MAX_ENV_FILE:
        raise click.BadParameter(f"{path} is larger than {_MAX_ENV_FILE} bytes; give a .env file", param_hint="--env-file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise click.BadParameter(f"{path} is not UTF-8 text ({exc.reason}); save it as UTF-8", param_hint="--env-file") from None


def _read_env_file(path: Path) -> dict[str, str]:
    """``KEY=VALUE`` lines (``#`` comments, blank lines, ``export`` and one pair of
    matching quotes around the value allowed), as in a ``.env`` file."""
    lines = _env_file_text(path).splitlines()
    found: dict[str, str] = {}
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        line = line.removeprefix("export ").lstrip()
        key, value = _env_pair(line, f"--env-file {path}, line {number}")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        found[key] = value
    return found


def _missing_packages(requirements: tuple[str, ...]) -> list[str]:
    """The requirements whose distribution is not installed in this interpreter."""
    missing = []
    for requirement in requirements:
        distribution = re.split(r"[\s\[<>=!~;@]", requirement.strip(), maxsplit=1)[0]
        try:
            importlib.metadata.distribution(distribution)
        except importlib.metadata.PackageNotFoundError:
            missing.append(requirement)
    return missing


@click.command(
    "install",
    help="Add the server in FILE to an MCP host's config: an entry that runs this Python with "
    "`-m modelctx serve FILE`. Other servers and settings in the file are kept.",
)
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--client", type=click.Choice(list(HOSTS)), default="claude-desktop", show_default=True, help="the host whose config to write")
@click.option("--name", help="the server's name in the host (default: FILE's name without .py)")
@click.option("--env", "env_pairs", multiple=True, metavar="KEY=VALUE", help="an environment variable for the server (repeatable)")
@click.option("--env-file", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="read KEY=VALUE lines (a .env file); --env wins")
@click.option(
    "--with",
    "packages",
    multiple=True,
    metavar="PKG",
    help="a package the server needs (repeatable): checked to be installed in this Python, which the entry runs",
)
@click.option("--config", type=click.Path(dir_okay=False, path_type=Path), help="the config file to write (default: the host's own)")
@click.option("--workspace", type=click.Path(file_okay=False, path_type=Path), help="a project folder: write its .cursor/, .vscode/ or .mcp.json file")
@click.option("--force", is_flag=True, help="replace a server of the same name")
@click.option("--dry-run", is_flag=True, help="print the entry and the file, change nothing")
def install_command(
    file: Path,
    client: str,
    name: str | None,
    env_pairs: tuple[str, ...],
    env_file: Path | None,
    packages: tuple[str, ...],
    config: Path | None,
    workspace: Path | None,
    force: bool,
    dry_run: bool,
) -> None:
    env = _read_env_file(env_file) if env_file is not None else {}
    env.update(_env_pair(pair, "--env") for pair in env_pairs)
    missing = _missing_packages(packages)
    if missing:
        raise click.ClickException(
            f"{', '.join(missing)} not installed in {sys.executable}, which the host will run; "
            f"install with: {sys.executable} -m pip install {' '.join(missing)}"
        )
    try:
        done = install(file, client=client, name=name, env=env, config=config, workspace=workspace, force=force, dry_run=dry_run)
    except InstallUsageError as exc:
        raise click.UsageError(str(exc)) from None  # status 2, as for a bad option
    except InstallError as exc:
        raise click.ClickException(str(exc)) from None
    verb = "Would write" if dry_run else "Wrote"
    servers_key = HOSTS[client].servers_key
    click.echo(f'{verb} server "{done.name}" for {client} to {done.path} (under "{servers_key}"):')
    click.echo(json.dumps({done.name: _shown(done.entry)}, indent=2, ensure_ascii=False))
    if not dry_run:
        click.echo(f"Restart {client} (or reload its MCP servers) to start it.")


def _shown(entry: dict[str, Any]) -> dict[str, Any]:
    """The entry as printed: ``env`` values are often API keys, and a terminal's scrollback
    or a CI log is no place for them; the names show what was set, the file holds the values."""
    env = entry.get("env")
    if not isinstance(env, dict) or not env:
        return entry
    return {**entry, "env": dict.fromkeys(env, "*** (written to the file)")}
