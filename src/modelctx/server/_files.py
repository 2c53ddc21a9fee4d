"""``FileRoot``: files under one directory, read by a path a client chose, never outside it.

A server that exposes files takes a path from the client (a resource template's
variable, a tool argument). Joined to a directory as it is, ``../../etc/passwd``, an
absolute path or a symlink out of the directory reaches any file the process can read.

Theory of operation. A path is refused before the file system is asked when it is
absolute, has a NUL byte or a ``..`` segment. The rest is joined to the root and
resolved with ``os.path.realpath`` (every symlink followed); the result must lie under
the root's own real path (``os.path.commonpath``), so a symlink inside the root that
points inside is fine and one that points out is refused. The file is then opened
with ``O_NOFOLLOW`` (a final component swapped for a symlink since the check fails to
open) and ``O_NONBLOCK`` (a FIFO cannot hang the reader), and the open descriptor is
checked again: a regular file, and (where ``/proc/self/fd`` shows it) still under the
root, so a directory swapped for a symlink between check and open is caught too.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import PathRefused

__all__ = ["FileRoot"]

_DEFAULT_MAX_BYTES = 16 * 1024 * 1024
_PROC_FD = "/proc/self/fd"


class FileRoot:
    """Read files under ``directory`` by relative path; every way out is refused.

    ``resolve``, ``read_bytes`` and ``read_text`` raise ``PathRefused`` (JSON-RPC -32602,
    the path as the client gave it in the message and in ``data.path``, never the
    root's place on disk) for a path that is absolute, has a NUL byte or a ``..``
    segment, leads out of the root through a symlink, does not exist, is not a regular
    file, or is larger than ``max_bytes`` (default 16 MiB, per call too). They do
    blocking file I/O: call them from a plain (sync) handler, which runs on a worker
    thread, or through ``asyncio.to_thread``.

    Example, a resource template serving a directory::

        from modelctx.server import FileRoot, Server

        server = Server("docs")
        docs = FileRoot("/srv/docs")

        @server.resource("file:///docs/{+path}", mime_type="text/markdown")
        def read_doc(path: str) -> str:
            return docs.read_text(path)  # "../secrets" or "/etc/passwd": PathRefused
    """

    def __init__(self, directory: str | os.PathLike[str], *, max_bytes: int = _DEFAULT_MAX_BYTES) -> None:
        real = os.path.realpath(directory)
        if not os.path.isdir(real):
            raise NotADirectoryError(f"FileRoot({os.fspath(directory)!r}): not a directory")
        self.path = Path(real)
        self.max_bytes = max_bytes
        self._root = real

    def __repr__(self) -> str:
        return f"FileRoot({self._root!r})"

    def resolve(self, relative: str) -> Path:
        """The real path of ``relative`` under the root (symlinks followed); it need not
        exist. ``PathRefused`` when it is absolute, has a NUL byte or a ``..``
        segment, or leads out of the root."""
        if not isinstance(relative, str):
            raise PathRefused(repr(relative), "a path is a string")
        if "\x00" in relative:
            raise PathRefused(relative, "the path has a NUL byte")
        if relative.startswith(("/", "\\")) or os.path.isabs(relative) or os.path.splitdrive(relative)[0]:
            raise PathRefused(relative, "the path is absolute: give one relative to the served directory")
        if ".." in relative.replace("\\", "/").split("/"):
            raise PathRefused(relative, "'..' is not allowed in a path")
        real = os.path.realpath(os.path.join(self._root, relative))
        if not self._contains(real):
            raise PathRefused(relative, "the path leads out of the served directory")
        return Path(real)

    def read_bytes(self, relative: str, max_bytes: int | None = None) -> bytes:
        """The bytes of the regular file ``relative``; ``PathRefused`` as in the class doc."""
        limit = self.max_bytes if max_bytes is None else max_bytes
        real = self.resolve(relative)
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(real, flags)
        except FileNotFoundError:
            raise PathRefused(relative, "no such file") from None
        except OSError:  # ELOOP: the last component became a symlink; EACCES; ENOTDIR...
            raise PathRefused(relative, "the file cannot be opened") from None
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

    def _contains(self, real: str) -> bool:
        return real == self._root or os.path.commonpath([self._root, real]) == self._root

    def _check_open(self, fd: int, relative: str, limit: int) -> None:
        """The descriptor, checked after opening: a regular file, small enough, and
        (where the system shows an open file's path) still under the root."""
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise PathRefused(relative, "not a regular file")
        if info.st_size > limit:
            raise PathRefused(relative, f"the file is larger than {limit} bytes")
        try:
            opened = os.readlink(f"{_PROC_FD}/{fd}")
        except OSError:  # no /proc (macOS, BSD): O_NOFOLLOW and the realpath check stand
            return
        if not self._contains(opened):
            raise PathRefused(relative, "the path leads out of the served directory")
