"""The reference servers joined by the gateway, used through the ``modelctx`` command.

A scratch folder gets some notes, a small SQLite shop and a memory store. One gateway
configuration joins the filesystem, SQLite and memory servers (``modelctx.servers``), and
every step below is the ``modelctx`` command line run for real: each starts the gateway
on stdio (``--stdio "modelctx gateway --config ..."``), which starts the three servers.
No API key is needed: nothing here asks a model.

    python examples/servers_demo.py            # in a fresh temporary folder
    python examples/servers_demo.py --keep     # and leave the folder for a look
"""

from __future__ import annotations

import json
import shlex
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

#: How long one command may take (it starts the gateway and three servers).
STEP_TIMEOUT = 120


def prepare(folder: Path) -> Path:
    """Fill ``folder`` with notes, a shop database and a gateway configuration; return
    the configuration's path."""
    notes = folder / "notes"
    notes.mkdir()
    (notes / "plan.md").write_text("# Plan\n\n- ship the reference servers\n- demo them without an API key\n")
    (notes / "ideas.md").write_text("# Ideas\n\n- a gateway in front of every server\n")
    with sqlite3.connect(folder / "shop.db") as db:
        db.execute("CREATE TABLE items (name TEXT PRIMARY KEY, price REAL NOT NULL)")
        db.executemany("INSERT INTO items VALUES (?, ?)", [("tea", 3.5), ("coffee", 4.0), ("cake", 2.75)])
    python = sys.executable
    config = {
        "mcpServers": {
            # Our own reference servers, marked trusted: their read-only tools (readOnlyHint)
            # run without asking, their other tools ask first (the default, "ask"). A tool's
            # annotations count only for a server the configuration trusts.
            "files": {
                "command": python,
                "args": ["-m", "modelctx.servers.filesystem", str(notes)],
                "trusted": True,
            },
            "shop": {
                "command": python,
                "args": ["-m", "modelctx.servers.sqlite", str(folder / "shop.db")],
                "trusted": True,
            },
            # Per-server approval: the memory server's writes run without asking.
            "memory": {
                "command": python,
                "args": ["-m", "modelctx.servers.memory", "--store", str(folder / "memory.sqlite3")],
                "approval": "allow",
            },
        }
    }
    path = folder / "gateway.json"
    path.write_text(json.dumps(config, indent=2))
    return path


#: Long arguments shown by a short name (the gateway's command line).
_SHORT: dict[str, str] = {}


def modelctx(*args: str, show: bool = True) -> str:
    """Run ``modelctx ARGS`` as a user would, show the command (and its output, unless
    ``show`` is False), and fail loudly if it fails."""
    shown = " ".join(_SHORT.get(a) or (shlex.quote(a) if " " in a or "{" in a or "'" in a else a) for a in args)
    print(f"\n$ modelctx {shown}", flush=True)
    done = subprocess.run(
        [sys.executable, "-m", "modelctx", *args], capture_output=True, text=True, timeout=STEP_TIMEOUT
    )
    if show:
        print(done.stdout.rstrip())
    if done.returncode != 0:
        print(done.stderr.rstrip(), file=sys.stderr)
        raise SystemExit(f"servers demo: `modelctx {args[0]}` exited with status {done.returncode}")
    return done.stdout


def main() -> None:
    keep = "--keep" in sys.argv[1:]
    folder = Path(tempfile.mkdtemp(prefix="modelctx-demo-"))
    config = prepare(folder)
    print(f"=== The reference servers behind one gateway ({config})")
    gateway = ["--stdio", f"{shlex.quote(sys.executable)} -m modelctx gateway --config {shlex.quote(str(config))}"]
    _SHORT[gateway[1]] = '"$GATEWAY"'
    print(f"GATEWAY={gateway[1]!r}")

    modelctx("discover", *gateway)
    listed = json.loads(modelctx("tools", *gateway, "--json", show=False))
    names = [tool["name"] for tool in listed["tools"]]
    print(f"{len(names)} tools, each named <server>_<tool>: {', '.join(names)}")
    notes = str(folder / "notes")
    modelctx("call", *gateway, "files_search_file_contents", f"path={notes}", "query=gateway")
    modelctx("call", *gateway, "files_read_text_file", f"path={notes}/plan.md", "head=2")
    modelctx("call", *gateway, "shop_query", "sql=SELECT name, price FROM items ORDER BY price")
    # A write is asked about twice: the gateway's approval policy asks before a tool that
    # is not read-only runs ("decision"), then the SQLite server asks the user to confirm
    # the statement ("confirm"). Both are elicitations to this client; on a terminal each
    # would be a prompt, here the answers are given on the command line.
    modelctx(
        "call", *gateway, "shop_execute", "sql=UPDATE items SET price = 3.0 WHERE name = 'tea'",
        "--accept-elicitation", '{"decision": "allow_once", "confirm": true}',
    )
    modelctx("call", *gateway, "shop_query", "sql=SELECT price FROM items WHERE name = 'tea'")
    entities = [{"name": "modelctx", "entityType": "project", "observations": ["speaks MCP 2026-07-28"]}]
    modelctx("call", *gateway, "memory_create_entities", "--args", json.dumps({"entities": entities}))
    modelctx("call", *gateway, "memory_search_nodes", "query=modelctx")
    print(f"\nDone. The folder {'is kept' if keep else 'was'} at {folder}")
    if not keep:
        subprocess.run(["rm", "-rf", str(folder)], check=False)


if __name__ == "__main__":
    main()
