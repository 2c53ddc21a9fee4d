"""``Roots``: the directories the server may touch, and the one way a client's path becomes a file.

Theory of operation. Every path a client gives goes through ``Roots.locate``: it is
refused before the file system is asked when it has a NUL byte, starts with ``~``
(no shell here expands it; a literal ``~`` directory would surprise the user), or has
a ``..`` segment. An absolute path must start with one root as given on the command
line or as its real path; a relative path is relative to the first root. The rest
goes to that root's ``FileRoot.resolve`` (``modelctx.server``), which follows every
symlink with ``realpath`` and refuses a result outside the root's real path, so a
symlink out, a loop (ELOOP is reported as such) and a root that is itself a symlink
(resolved once, at start) are all handled by the same check.

Comparisons are byte for byte on real paths: a sibling directory whose name differs
from a root's only by case or by Unicode normalisation (NFC vs NFD) is another
directory, and is outside.

Opening closes the gap between check and use: ``open_confined`` opens the parent
directory with ``O_DIRECTORY|O_NOFOLLOW``, checks where that descriptor really is
(``/proc/self/fd``), and opens the last component relative to it with ``O_NOFOLLOW``,
so a directory or file swapped for a symlink after the check cannot lead out.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path

from ...errors import PathRefused, ToolError
from ...server import FileRoot

__all__ = ["Located", "Roots", "describe_os_error", "open_confined", "open_parent"]

_PROC_FD = "/proc/self/fd"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


@dataclass(frozen=True)
class Located:
    """A client's path, checked: the root it is under and its real path there."""

    given: str
    root: FileRoot
    real: Path


class Roots:
    """The allowed directories, each resolved to its real path once, at start."""

    def __init__(self, directories: list[str]) -> None:
        if not directories:
            raise ValueError("give at least one directory to serve")
        self.roots: list[FileRoot] = []
        self._prefixes: list[tuple[str, FileRoot]] = []
        for directory in directories:
            root = FileRoot(directory)  # realpath once: a symlinked root is fixed here
            self.roots.append(root)
            for prefix in {os.path.abspath(directory), str(root.path)}:
                self._prefixes.append((prefix, root))
        # Longest first: a root nested in another is matched by its own prefix.
        self._prefixes.sort(key=lambda item: len(item[0]), reverse=True)

    def locate(self, path: str) -> Located:
        """``path`` checked against the roots; ``ToolError`` saying why when it is refused."""
        if not isinstance(path, str) or not path:
            raise ToolError("a path is a non-empty string")
        if "\x00" in path:
            raise ToolError(f"refused {path!r}: the path has a NUL byte")
        if path.startswith("~"):
            raise ToolError(f"refused {path!r}: '~' is not expanded; give a path under {self.describe()}")
        if ".." in path.replace("\\", "/").split("/"):
            raise ToolError(f"refused {path!r}: '..' is not allowed; give a path under {self.describe()}")
        root, relative = self._split(path)
        try:
            real = root.resolve(relative or ".")
        except PathRefused:
            raise ToolError(
                f"refused {path!r}: it leads outside the allowed directories ({self.describe()}) through a symlink"
            ) from None
        except OSError as exc:
            raise ToolError(f"refused {path!r}: {_why(exc)}") from None
        _check_loop(path, real)
        return Located(path, root, real)

    def describe(self) -> str:
        return ", ".join(str(root.path) for root in self.roots)

    def _split(self, path: str) -> tuple[FileRoot, str]:
        if not os.path.isabs(path):
            return self.roots[0], path
        clean = path.rstrip("/") or "/"
        for prefix, root in self._prefixes:
            if clean == prefix:
                return root, ""
            if clean.startswith(prefix.rstrip("/") + "/"):
                return root, clean[len(prefix.rstrip("/")) + 1 :]
        raise ToolError(f"refused {path!r}: it is outside the allowed directories ({self.describe()})")


def _check_loop(given: str, real: Path) -> None:
    """realpath stops quietly at a symlink loop; say so instead of "no such file"."""
    try:
        os.stat(real)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ToolError(f"refused {given!r}: it is a symlink loop") from None


def _why(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "it is a symlink loop"
    if exc.errno == errno.ENOENT:
        return "no such file or directory"
    if exc.errno == errno.ENOTDIR:
        return "a part of the path is not a directory"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if exc.errno == errno.EISDIR:
        return "it is a directory"
    if exc.errno == errno.EEXIST:
        return "it already exists"
    return exc.strerror or "it cannot be opened"


def describe_os_error(given: str, exc: OSError) -> ToolError:
    """A ``ToolError`` for an ``OSError`` on ``given``: what failed, never the traceback."""
    return ToolError(f"{given!r}: {_why(exc)}")


def _contained(root: FileRoot, real: str) -> bool:
    top = str(root.path)
    return real == top or os.path.commonpath([top, real]) == top


def _where(fd: int) -> str | None:
    try:
        return os.readlink(f"{_PROC_FD}/{fd}")
    except OSError:  # no /proc (macOS, BSD): O_NOFOLLOW and the realpath check stand
        return None


def open_parent(located: Located) -> int:
    """A descriptor of the directory holding ``located``, opened without following a
    symlink in its place and checked to be in the root; ``ToolError`` otherwise."""
    try:
        parent = os.open(located.real.parent, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW | _CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ENOTDIR, errno.ELOOP) and os.path.islink(located.real.parent):
            raise ToolError(
                f"refused {located.given!r}: its directory was replaced by a symlink after it was checked"
            ) from None
        raise describe_os_error(located.given, exc) from None
    return _checked(located, parent)


def open_confined(located: Located, flags: int, mode: int = 0o644) -> int:
    """A descriptor for ``located`` opened without following a symlink anywhere a swap
    could lead out; ``ToolError`` when it cannot be opened or is no longer in its root."""
    real = located.real
    if real == located.root.path:
        return _checked(located, os.open(real, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC))
    parent = open_parent(located)
    try:
        fd = os.open(real.name, flags | _NOFOLLOW | _CLOEXEC | _NONBLOCK, mode, dir_fd=parent)
    except OSError as exc:
        raise describe_os_error(located.given, exc) from None
    finally:
        os.close(parent)
    return _checked(located, fd)


def _checked(located: Located, fd: int) -> int:
    """``fd``, if where it really is lies under the root; else it is closed and refused."""
    where = _where(fd)
    if where is not None and not _contained(located.root, where):
        os.close(fd)
        raise ToolError(f"refused {located.given!r}: it leads outside the allowed directories")
    return fd
