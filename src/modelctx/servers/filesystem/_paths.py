"""``Roots``: the directories the server may touch, and the one way a client's path becomes a file.

Theory of operation. Every path a client gives goes through ``Roots.locate``: it is
refused before the file system is asked when it has a NUL byte, starts with ``~``
(no shell here expands it; a literal ``~`` directory would surprise the user), or has
a ``..`` segment. An absolute path must start with one root as given on the command
line or as its real path; a relative path is relative to the first root. The rest
goes to that root's ``FileRoot.resolve`` (``modelctx.server``), which walks it from the
root's descriptor, reading each symlink and walking its target again, and refuses a
target that leads out; a loop (more than 40 links) is reported as such, and a root that
is itself a symlink was resolved once, at start.

Comparisons are byte for byte on real paths: a sibling directory whose name differs
from a root's only by case or by Unicode normalisation (NFC vs NFD) is another
directory, and is outside.

Using a located path never goes through a path either. ``open_directory`` walks the
real path from the root's descriptor, every directory opened ``O_DIRECTORY|O_NOFOLLOW``
under the one before (``FileRoot.open_directory``); what a tool does there (open a file,
``mkdir``, ``scandir``, ``stat``, ``rename``) is done by name under that descriptor, with
``O_NOFOLLOW`` or ``follow_symlinks=False``. The real path has no symlink in it, so one
met on the way was swapped in after the check: the walk stops there, with a tool error
that says so, and nothing outside is listed, made, stat'ed, read or written.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ...errors import PathRefused, ToolError
from ...server import FileRoot

__all__ = [
    "MAX_DEPTH",
    "Located",
    "Roots",
    "describe_os_error",
    "open_confined",
    "open_directory",
    "open_parent",
    "stat_located",
    "walk",
]

MAX_DEPTH = FileRoot.MAX_DEPTH
#: The longest path a client may send, in characters (Linux's PATH_MAX is 4,096 bytes).
MAX_PATH_CHARS = 4096
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_DIRECTORY_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | _CLOEXEC


@dataclass(frozen=True)
class Located:
    """A client's path, checked: the root it is under and its real path there."""

    given: str
    root: FileRoot
    real: Path

    @property
    def is_root(self) -> bool:
        return self.real == self.root.path


class Roots:
    """The allowed directories, each resolved to its real path once, at start."""

    def __init__(self, directories: list[str]) -> None:
        if not directories:
            raise ValueError("give at least one directory to serve")
        self.roots: list[FileRoot] = []
        self._prefixes: list[tuple[str, FileRoot]] = []
        for directory in directories:
            root = FileRoot(directory)  # opened once: a symlinked root is fixed here
            self.roots.append(root)
            for prefix in {os.path.abspath(directory), str(root.path)}:
                self._prefixes.append((prefix, root))
        # Longest first: a root nested in another is matched by its own prefix.
        self._prefixes.sort(key=lambda item: len(item[0]), reverse=True)

    def locate(self, path: str) -> Located:
        """``path`` checked against the roots; ``ToolError`` saying why when it is refused."""
        if not isinstance(path, str) or not path:
            raise ToolError("a path is a non-empty string")
        if len(path) > MAX_PATH_CHARS:
            raise ToolError(f"refused a path of {len(path)} characters: give one of at most {MAX_PATH_CHARS}")
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
                f"refused {_quoted(path)}: it leads outside the allowed directories ({self.describe()}) through a symlink"
            ) from None
        except OSError as exc:
            raise ToolError(f"refused {_quoted(path)}: {_why(exc)}") from None
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


def _quoted(path: str) -> str:
    """``path`` quoted for a message; a long one by its start and end."""
    return repr(path) if len(path) <= 200 else f"{path[:120]!r}...{path[-40:]!r} ({len(path)} characters)"


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
    if exc.errno == errno.ENAMETOOLONG:
        return f"it is too long: at most {MAX_DEPTH} directories deep, and 255 bytes a name"
    if exc.errno == errno.EMFILE:
        return "the server has too many files open; try again"
    return exc.strerror or "it cannot be opened"


def describe_os_error(given: str, exc: OSError) -> ToolError:
    """A ``ToolError`` for an ``OSError`` on ``given``: what failed, never the traceback."""
    return ToolError(f"{given!r}: {_why(exc)}")


def _in_use(located: Located, exc: OSError) -> ToolError:
    """A ``ToolError`` for an ``OSError`` met while using a located path: a symlink on
    the real path was swapped in after the check."""
    if exc.errno == errno.ELOOP:
        return ToolError(f"refused {located.given!r}: it or a directory on it was replaced by a symlink after it was checked")
    return describe_os_error(located.given, exc)


def _open_real(located: Located, real: Path, create: bool = False, missing: str | None = None) -> int:
    try:
        return located.root.open_directory(real, create=create)
    except PathRefused:
        raise ToolError(f"refused {located.given!r}: it leads outside the allowed directories") from None
    except FileNotFoundError as exc:
        raise (ToolError(missing) if missing else _in_use(located, exc)) from None
    except OSError as exc:
        raise _in_use(located, exc) from None


def open_directory(located: Located, *, create: bool = False) -> int:
    """A descriptor of the directory ``located`` (made, with its parents, when ``create``),
    walked from its root's descriptor without following a link; ``ToolError`` otherwise."""
    return _open_real(located, located.real, create=create)


def open_parent(located: Located, missing: str | None = None) -> int:
    """A descriptor of the directory holding ``located``, walked as ``open_directory``
    does; ``ToolError`` otherwise (``missing`` is its text when that directory does not
    exist). A root has no parent the server may use."""
    if located.is_root:
        raise ToolError(f"refused {located.given!r}: it is an allowed directory itself; its parent is outside them")
    return _open_real(located, located.real.parent, missing=missing)


def open_confined(located: Located, flags: int, mode: int = 0o644, missing: str | None = None) -> int:
    """A descriptor for ``located`` opened by name under its parent's descriptor, with
    ``O_NOFOLLOW``; ``ToolError`` when it cannot be opened."""
    if located.is_root:
        return open_directory(located)
    parent = open_parent(located, missing)
    try:
        return os.open(located.real.name, flags | _NOFOLLOW | _CLOEXEC | _NONBLOCK, mode, dir_fd=parent)
    except OSError as exc:
        raise _in_use(located, exc) from None
    finally:
        os.close(parent)


def stat_located(located: Located) -> os.stat_result:
    """``lstat`` of ``located`` by name under its parent's descriptor (a link is described, not followed)."""
    if located.is_root:
        fd = open_directory(located)
        try:
            return os.fstat(fd)
        finally:
            os.close(fd)
    parent = open_parent(located)
    try:
        return os.stat(located.real.name, dir_fd=parent, follow_symlinks=False)
    except OSError as exc:
        raise describe_os_error(located.given, exc) from None
    finally:
        os.close(parent)


def _listing(fd: int, limit: int) -> list[os.DirEntry[str]]:
    """The entries of the directory ``fd`` in name order, at most ``limit``. Each
    ``DirEntry`` answers ``stat``/``is_dir`` by name under ``fd`` while ``fd`` is open."""
    entries: list[os.DirEntry[str]] = []
    with os.scandir(fd) as scan:
        for entry in scan:
            entries.append(entry)
            if len(entries) >= limit:
                break
    return sorted(entries, key=lambda entry: entry.name)


def walk(located: Located, enter: Callable[[str, int], bool], limit: int) -> Iterator[tuple[str, os.DirEntry[str]]]:
    """(relative path, entry) for everything under the directory ``located``, top-down as
    ``os.walk`` goes (a directory's entries, in name order, before what is under them).
    A directory is entered when ``enter(relative path, depth)`` says so (depth 1 is
    ``located``'s own entries' level); a symlink is listed, never followed. Each directory
    is opened by name under its parent's descriptor with ``O_NOFOLLOW``, so one swapped
    for a symlink since it was listed is skipped. At most ``limit`` entries a directory
    are read. The entry's ``stat`` works until the next item is asked for."""
    stack: list[tuple[int, str, Iterator[str]]] = []
    fd = open_directory(located)
    try:
        prefix = ""
        while True:
            try:
                entries = _listing(fd, limit)
            except OSError as exc:
                if not stack and not prefix:
                    raise describe_os_error(located.given, exc) from None
                entries = []  # a directory below that cannot be read: left out
            below = [entry.name for entry in entries if entry.is_dir(follow_symlinks=False)]
            depth = len(stack) + 1
            for entry in entries:
                yield prefix + entry.name, entry
            stack.append((fd, prefix, iter([n for n in below if enter(prefix + n, depth)])))
            fd = -1
            while stack and fd < 0:
                parent, parent_prefix, pending = stack[-1]
                name = next(pending, None)
                if name is None:
                    os.close(parent)
                    stack.pop()
                    continue
                try:
                    fd = os.open(name, _DIRECTORY_FLAGS, dir_fd=parent)
                except OSError:  # gone, or swapped for a symlink since it was listed: not entered
                    continue
                prefix = parent_prefix + name + "/"
            if fd < 0:
                return
    finally:
        if fd >= 0:
            os.close(fd)
        for parent, _, _ in stack:
            os.close(parent)
