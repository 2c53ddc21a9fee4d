"""``load_server``: the ``Server`` that ``PATH[:OBJECT]`` or ``module[:OBJECT]`` names.

Mistakes in the target (a directory, a file or module that is not there, no ``Server``
in it) end with one line on stderr saying what to do and status 2, not a traceback. An
exception raised by the user's own module while it loads is reported in the user's
terms (their file and line) and status 1.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import traceback
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any, NoReturn

from ._exit import ExitCode

__all__ = ["fail", "load_server"]


class _TargetError(Exception):
    """``PATH[:OBJECT]`` names nothing servable; the message says why and what to do."""


def fail(message: str) -> NoReturn:
    """One line on stderr, then the usage-error status (a mistake on the command line)."""
    print(f"modelctx: {message}", file=sys.stderr)
    raise SystemExit(ExitCode.USAGE)


def _load_file(file: Path) -> ModuleType:
    sys.path.insert(0, str(file.parent))  # its sibling modules import as they would under `python FILE`
    spec = importlib.util.spec_from_file_location(file.stem, file)
    if spec is None or spec.loader is None:
        raise _TargetError(f"cannot load {file} as Python; serve a .py file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[file.stem] = module
    spec.loader.exec_module(module)
    return module


def _load_module(name: str) -> ModuleType:
    # The console script does not put the current directory on sys.path (``python -m``
    # does); a module beside the user should import either way.
    if "" not in sys.path and "." not in sys.path:
        sys.path.insert(0, "")
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (name == exc.name or name.startswith(exc.name + ".")):
            raise  # the module exists; something it imports does not: show the traceback
        raise _TargetError(
            f"no file or module named {name!r}: give the path of a .py file "
            "(modelctx serve weather.py) or the dotted name of a module importable from here"
        ) from None


def _directory_hint(directory: Path) -> str:
    candidates = sorted(p.name for p in directory.glob("*.py") if not p.name.startswith("_"))[:5]
    hint = f"{directory} is a directory; name the file that holds the Server"
    if candidates:
        hint += f", e.g. modelctx serve {directory / candidates[0]} (files here: {', '.join(candidates)})"
    return hint


def _find_server(module: ModuleType, where: str, attr: str) -> Any:
    from ..server import Server

    if attr:
        if not hasattr(module, attr):
            raise _TargetError(f"{where} has no attribute {attr!r}")
        found = getattr(module, attr)
    else:
        named = [getattr(module, n) for n in ("server", "app", "mcp") if isinstance(getattr(module, n, None), Server)]
        servers = named[:1] or [v for v in vars(module).values() if isinstance(v, Server)]
        if not servers:
            raise _TargetError(
                f"{where} has no modelctx Server; create one at module level "
                '(server = Server("name")) or name a factory as ' + f"{where}:FUNCTION"
            )
        if len(servers) != 1:
            raise _TargetError(
                f"found {len(servers)} Server objects in {where}; name one as {where}:NAME"
            )
        found = servers[0]
    if callable(found) and not isinstance(found, Server):
        found = found()  # a factory
    if not isinstance(found, Server):
        raise _TargetError(f"{where}:{attr} is {type(found).__name__}, not a modelctx Server")
    return found


_PACKAGE_DIR = str(Path(__file__).resolve().parent.parent)
_CLI_DIR = str(Path(__file__).resolve().parent)


def _user_frames(tb: TracebackType | None) -> TracebackType | None:
    """``tb`` from the first frame of the user's code (this package and importlib's
    machinery say nothing the user can act on)."""
    while tb is not None and (
        tb.tb_frame.f_code.co_filename.startswith(_CLI_DIR) or tb.tb_frame.f_code.co_filename.startswith("<frozen ")
    ):
        tb = tb.tb_next
    return tb


def _report_load_error(exc: BaseException) -> NoReturn:
    """The user's module failed while it loaded: say where, in the user's terms.

    A syntax error shows the line and the caret; a ``RegistrationError`` (its message
    names the tool and what to do) one line with the place that registered it; any
    other exception its traceback from the user's first frame. Status 1.
    """
    from ..errors import RegistrationError

    if isinstance(exc, SyntaxError):
        print("modelctx: the server file has a syntax error:", file=sys.stderr)
        print("".join(traceback.format_exception_only(exc)), end="", file=sys.stderr)
    elif isinstance(exc, RegistrationError):
        place = ""
        for frame, line in traceback.walk_tb(exc.__traceback__):
            filename = frame.f_code.co_filename
            if not filename.startswith(("<frozen ", _PACKAGE_DIR)):
                place = f"{filename}:{line}: "  # the last user frame: the decorator's line
        print(f"modelctx: {place}{exc}", file=sys.stderr)
    else:
        traceback.print_exception(type(exc), exc, _user_frames(exc.__traceback__))
    raise SystemExit(1)  # as Python exits on an uncaught exception


def load_server(target: str) -> Any:
    """The ``Server`` named by ``PATH[:OBJECT]`` or ``module[:OBJECT]``.

    Without ``:OBJECT`` the module's ``server``, ``app`` or ``mcp`` attribute is used,
    else its only ``Server`` instance. Raises ``SystemExit`` (status 2, one line on
    stderr) when the target names nothing servable.
    """
    where, _, attr = target.partition(":")
    path = Path(where)
    try:
        if path.is_dir():
            raise _TargetError(_directory_hint(path))
        if where.endswith(".py") or path.is_file():
            if not path.is_file():
                raise _TargetError(f"no such file: {where}")
            module = _load_file(path.resolve())
        elif "/" in where or "\\" in where:
            raise _TargetError(f"no such file or directory: {where}")
        else:
            module = _load_module(where)
    except _TargetError as exc:
        fail(str(exc))
    except Exception as exc:  # noqa: BLE001 - the user's module failed: report it, no internals
        _report_load_error(exc)
    try:
        return _find_server(module, where, attr)
    except _TargetError as exc:
        fail(str(exc))
