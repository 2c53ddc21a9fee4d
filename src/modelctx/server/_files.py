"""``FileRoot``: files under one directory, read by a path a client chose, never outside it.

A server that exposes files takes a path from the client (a resource template's
variable, a tool argument). Joined to a directory as it is, ``../../etc/passwd``, an
absolute path or a symlink out of the directory reaches any file the process can read.

Theory of operation. A path is refused before the file system is asked when it is
absolute, has a NUL byte or a ``..`` segment. Nothing after that goes through a path
the kernel resolves: the root is opened once, at start, and every lookup walks from that
descriptor one name at a time, each directory opened with ``O_DIRECTORY|O_NOFOLLOW``
relative to the one before (``dir_fd=``), so no symlink and no directory swapped for one
is ever followed by the kernel. Two walks:

- ``resolve`` finds the real path: a symlink met on the way is read (``readlink`` under
  its directory's descriptor) and its target walked again: from the link's directory when
  relative, with ``..`` taken off the real names walked so far; from the root when
  absolute, its real path taken as a name only (it must lie under the root's, and what it
  names there is walked again from the root's descriptor). A target that climbs above the
  root or names another place is refused; more than ``MAX_LINKS`` links is a loop; a missing name
  ends the lookup (the rest is kept as given, so a path to create resolves too).
- ``open_directory`` then opens the real path found, every component with ``O_NOFOLLOW``:
  the real path has no symlink in it, so one found there now was swapped in after the
  check, and the walk stops instead of following it (``ELOOP``). What is done in the
  directory then (open, ``mkdir``, ``scandir``, ``stat``, ``rename``) is done by name
  relative to its descriptor, never by path.

Where ``/proc/self/fd`` shows an open descriptor's path, the directory reached is checked
to be under the root still (a directory moved out of the root while it was being walked).
A path deeper than ``MAX_DEPTH`` directories is refused (``ENAMETOOLONG``): the kernel's
own path lookups stop at 4,096 bytes, and a deeper tree is one no other tool can use.
"""

from __future__ import annotations

import errno
import os
import stat
import weakref
from pathlib import Path

from ..errors import PathRefused

__all__ = ["FileRoot"]

_DEFAULT_MAX_BYTES = 16 * 1024 * 1024
_PROC_FD = "/proc/self/fd"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_DIRECTORY_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | _CLOEXEC

MAX_LINKS = 40  # symlinks followed in one lookup before it is called a loop (Linux's MAXSYMLINKS)
MAX_DEPTH = 256  # directories below the root a path may go; deeper is refused (ENAMETOOLONG)


def _names(path: str) -> list[str]:
    """The names of a relative path, ``.`` and empty ones left out; ``..`` kept."""
    return [name for name in path.split("/") if name not in ("", ".")]


def _too_deep() -> OSError:
    return OSError(errno.ENAMETOOLONG, f"more than {MAX_DEPTH} directories deep")


class FileRoot:
    """Read files under ``directory`` by relative path; every way out is refused.

    ``resolve``, ``read_bytes`` and ``read_text`` raise ``PathRefused`` (JSON-RPC -32602,
    the path as the client gave it in the message and in ``data.path``, never the
    root's place on disk) for a path that is absolute, has a NUL byte or a ``..``
    segment, leads out of the root through a symlink, does not exist, is not a regular
    file, or is larger than ``max_bytes`` (default 16 MiB, per call too). They do
    blocking file I/O: call them from a plain (sync) handler, which runs on a worker
    thread, or through ``asyncio.to_thread``.

    The directory is opened when the ``FileRoot`` is made and served by that descriptor:
    renaming it, or pointing a symlink that named it elsewhere, changes nothing.

    Example, a resource template serving a directory::

        from modelctx.server import FileRoot, Server

        server = Server("docs")
        docs = FileRoot("/srv/docs")

        @server.resource("file:///docs/{+path}", mime_type="text/markdown")
        def read_doc(path: str) -> str:
            return docs.read_text(path)  # "../secrets" or "/etc/passwd": PathRefused
    """

    #: Directories below the root a path may go (``FileRoot.resolve`` and
    #: ``open_directory`` refuse deeper with ``ENAMETOOLONG``).
    MAX_DEPTH = MAX_DEPTH
    #: Symlinks one lookup follows before it is called a loop (``ELOOP``).
    MAX_LINKS = MAX_LINKS

    def __init__(self, directory: str | os.PathLike[str], *, max_bytes: int = _DEFAULT_MAX_BYTES) -> None:
        real = os.path.realpath(directory)
        try:
            fd = os.open(real, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC)
        except OSError:
            raise NotADirectoryError(f"FileRoot({os.fspath(directory)!r}): not a directory") from None
        self._fd = fd
        weakref.finalize(self, os.close, fd)
        self.path = Path(real)
        self.max_bytes = max_bytes
        self._root = real

    def __repr__(self) -> str:
        return f"FileRoot({self._root!r})"

    def resolve(self, relative: str) -> Path:
        """The real path of ``relative`` under the root (symlinks followed, each read and
        walked again from a descriptor); it need not exist. ``PathRefused`` when it is
        absolute, has a NUL byte or a ``..`` segment, or leads out of the root;
        ``OSError`` with ``ELOOP`` for a symlink loop and ``ENAMETOOLONG`` past
        ``MAX_DEPTH`` directories."""
        if not isinstance(relative, str):
            raise PathRefused(repr(relative), "a path is a string")
        if "\x00" in relative:
            raise PathRefused(relative, "the path has a NUL byte")
        if relative.startswith(("/", "\\")) or os.path.isabs(relative) or os.path.splitdrive(relative)[0]:
            raise PathRefused(relative, "the path is absolute: give one relative to the served directory")
        if ".." in relative.replace("\\", "/").split("/"):
            raise PathRefused(relative, "'..' is not allowed in a path")
        names = _names(relative)
        if len(names) > MAX_DEPTH:
            raise _too_deep()
        return self.path.joinpath(*self._real_names(relative, names))

    def open_directory(self, real: Path, *, create: bool = False) -> int:
        """A descriptor of the directory ``real`` (the root, or a path ``resolve`` gave),
        reached from the root's descriptor one name at a time, each opened with
        ``O_DIRECTORY|O_NOFOLLOW``; with ``create``, a missing one is made (``mkdir``
        under its parent's descriptor). The caller closes it.

        Raises ``OSError``: ``ELOOP`` when a name on the way is a symlink (swapped in
        after ``resolve``: it is not followed), ``ENOENT``, ``ENOTDIR``, ``EACCES``,
        ``ENAMETOOLONG`` (past ``MAX_DEPTH``); and ``PathRefused`` when ``real`` is not
        under the root or the directory reached is no longer there."""
        try:
            names = real.relative_to(self.path).parts
        except ValueError:
            raise PathRefused(str(real), "the path leads out of the served directory") from None
        if len(names) > MAX_DEPTH:
            raise _too_deep()
        fd = os.dup(self._fd)
        try:
            for name in names:
                child = _open_child(fd, name, create)
                os.close(fd)
                fd = child
            self._check_where(fd, "/".join(names))
        except BaseException:
            os.close(fd)
            raise
        return fd

    def read_bytes(self, relative: str, max_bytes: int | None = None) -> bytes:
        """The bytes of the regular file ``relative``; ``PathRefused`` as in the class doc."""
        limit = self.max_bytes if max_bytes is None else max_bytes
        try:
            real = self.resolve(relative)
        except OSError as exc:
            why = "the path is a symlink loop" if exc.errno == errno.ELOOP else "the path is too deep"
            raise PathRefused(relative, why) from None
        if real == self.path:
            raise PathRefused(relative, "not a regular file")
        fd = self._open_file(relative, real)
        try:
            self._check_open(fd, relative, limit)
            with os.fdopen(fd, "rb", closefd=False) as file:
                data = file.read(limit + 1)
        finally:
            os.close(fd)
        if len(data) > limit:  # it grew since fstat
            raise PathRefused(relative, f"the file is larger than {limit} bytes")
        return data

    def read_text(self, relative: str, max_bytes: int | None = None, encoding: str = "utf-8") -> str:
        """The text of the file ``relative``; ``PathRefused`` also when it does not decode."""
        data = self.read_bytes(relative, max_bytes)
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            raise PathRefused(relative, f"the file is not {encoding} text") from None

    # -- the walks -----------------------------------------------------------------------------
    def _real_names(self, relative: str, names: list[str]) -> list[str]:
        """The real names under the root that ``names`` lead to. ``walked`` are real
        directories (each opened without following a link); from the first name that is
        missing or not a directory on, the rest is kept as given (``..`` still taken off)."""
        pending = list(reversed(names))
        walked: list[str] = []
        kept: list[str] = []
        links = 0
        fd = os.dup(self._fd)
        try:
            while pending:
                name = pending.pop()
                if name == "..":  # only from a symlink's target
                    if kept:
                        kept.pop()
                        continue
                    if not walked:
                        raise PathRefused(relative, "the path leads out of the served directory")
                    walked.pop()
                    os.close(fd)
                    fd = -1
                    fd = self.open_directory(self.path.joinpath(*walked))
                    continue
                target = None if kept else self._step(fd, name, last=not pending)
                if isinstance(target, int):
                    os.close(fd)
                    fd = target
                    walked.append(name)
                elif target is None:
                    (kept if kept or pending else walked).append(name)
                else:
                    links += 1
                    if links > MAX_LINKS:
                        raise OSError(errno.ELOOP, "a symlink loop")
                    if target.startswith("/"):
                        walked, target = [], self._under_root(relative, target)
                        os.close(fd)
                        fd = -1
                        fd = os.dup(self._fd)
                    pending.extend(reversed(_names(target)))
                if len(walked) + len(kept) > MAX_DEPTH:
                    raise _too_deep()
        finally:
            if fd >= 0:
                os.close(fd)
        return walked + kept

    @staticmethod
    def _step(fd: int, name: str, last: bool) -> int | str | None:
        """One name under ``fd``: a descriptor when it is a directory to walk on, the
        target when it is a symlink, None otherwise (the last name is not opened)."""
        if last:
            return _link_target(fd, name)
        try:
            return _open_child(fd, name, create=False)
        except OSError as exc:
            return _link_target(fd, name) if exc.errno == errno.ELOOP else None

    def _under_root(self, relative: str, target: str) -> str:
        """An absolute symlink target as a path relative to the root. Its real path is
        only a name here: what it names under the root is walked again from the root's
        descriptor, so a link outside cannot lead anywhere the walk does not check."""
        real = os.path.realpath(target)
        if real == self._root:
            return ""
        if self._contains(real):
            return real[len(self._root.rstrip("/")) + 1 :]
        raise PathRefused(relative, "the path leads out of the served directory")

    def _open_file(self, relative: str, real: Path) -> int:
        try:
            parent = self.open_directory(real.parent)
        except FileNotFoundError:
            raise PathRefused(relative, "no such file") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise PathRefused(relative, "the path leads out of the served directory (a directory on it "
                                  "was replaced by a symlink)") from None
            raise PathRefused(relative, "the file cannot be opened") from None
        flags = os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC
        try:
            return os.open(real.name, flags, dir_fd=parent)
        except FileNotFoundError:
            raise PathRefused(relative, "no such file") from None
        except OSError:  # ELOOP: the last name became a symlink; EACCES; ENOTDIR...
            raise PathRefused(relative, "the file cannot be opened") from None
        finally:
            os.close(parent)

    def _contains(self, real: str) -> bool:
        return real == self._root or os.path.commonpath([self._root, real]) == self._root

    def _check_where(self, fd: int, shown: str) -> None:
        """Where the system shows an open descriptor's path: it must be under the root."""
        try:
            where = os.readlink(f"{_PROC_FD}/{fd}")
        except OSError:  # no /proc (macOS, BSD): the walk without following links stands
            return
        if not self._contains(where):
            raise PathRefused(shown, "the path leads out of the served directory")

    def _check_open(self, fd: int, relative: str, limit: int) -> None:
        """The descriptor, checked after opening: a regular file, small enough, and
        (where the system shows an open file's path) still under the root."""
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise PathRefused(relative, "not a regular file")
        if info.st_size > limit:
            raise PathRefused(relative, f"the file is larger than {limit} bytes")
        self._check_where(fd, relative)


def _open_child(fd: int, name: str, create: bool) -> int:
    """``name`` under the directory ``fd``, opened as a directory without following a link."""
    if name in ("", ".", "..") or "/" in name:
        raise PathRefused(name, "not a name of a directory")
    try:
        return os.open(name, _DIRECTORY_FLAGS, dir_fd=fd)
    except FileNotFoundError:
        if not create:
            raise
    except OSError as exc:
        if exc.errno in (errno.ENOTDIR, errno.ELOOP) and _link_target(fd, name) is not None:
            raise OSError(errno.ELOOP, f"{name!r} is a symlink") from None
        raise
    try:
        os.mkdir(name, dir_fd=fd)
    except FileExistsError:  # made by someone else meanwhile: opened as any other
        pass
    return _open_child(fd, name, create=False)


def _link_target(fd: int, name: str) -> str | None:
    """What the symlink ``name`` under ``fd`` points to; None when it is not a symlink."""
    try:
        return os.readlink(name, dir_fd=fd)
    except OSError:  # EINVAL: not a symlink; ENOENT: missing
        return None
