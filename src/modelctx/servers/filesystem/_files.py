"""Reading and writing one confined file: bounded reads, line and byte ranges, atomic-enough writes.

Every function takes a ``Located`` (a path ``Roots.locate`` accepted) and opens it
through ``open_confined`` (or its directory through ``open_parent``), walked from the
root's descriptor: none follows a symlink, none uses a path.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import sys

from ...errors import ToolError
from ._paths import Located, describe_os_error, open_confined, open_parent

_NO_DIRECTORY = "cannot {} {!r}: its directory does not exist (create_directory first)"

__all__ = ["MAX_READ", "move", "read_bytes", "read_lines", "read_text", "write_text"]

#: The most a single read returns; past it the caller is asked for a range.
MAX_READ = 4 * 1024 * 1024
_CHUNK = 64 * 1024


def _open_regular(located: Located) -> int:
    fd = open_confined(located, os.O_RDONLY)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise ToolError(f"cannot read {located.given!r}: it is {kind}")
    return fd


def read_bytes(located: Located, offset: int = 0, length: int | None = None) -> bytes:
    """Bytes ``offset`` to ``offset + length`` (to the end without ``length``); at most
    ``MAX_READ``, else ``ToolError`` asking for a range."""
    if offset < 0 or (length is not None and length < 0):
        raise ToolError("offset and length are counts of bytes, 0 or more")
    fd = _open_regular(located)
    try:
        size = os.fstat(fd).st_size
        wanted = max(0, size - offset) if length is None else length
        if wanted > MAX_READ:
            raise ToolError(
                f"{located.given!r} is {size} bytes; read at most {MAX_READ} at a time "
                "(give offset and length, or head/tail lines)"
            )
        return os.pread(fd, wanted, offset)
    except OSError as exc:
        raise describe_os_error(located.given, exc) from None
    finally:
        os.close(fd)


def _decode(located: Located, data: bytes, where: str = "") -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolError(
            f"{located.given!r} is not UTF-8 text{where} (byte {exc.start}: {data[exc.start:exc.start + 1]!r}); "
            "read it with read_media_file, or as bytes with offset/length"
        ) from None


def read_text(located: Located, offset: int = 0, length: int | None = None) -> str:
    """The text of the file (or of a byte range; a range cutting a character in two is
    decoded with replacement characters at its ends only)."""
    data = read_bytes(located, offset, length)
    if offset or length is not None:
        return data.decode("utf-8", errors="replace")
    return _decode(located, data)


def read_lines(located: Located, head: int | None, tail: int | None) -> str:
    """The first ``head`` or last ``tail`` lines, streaming: at most ``MAX_READ`` bytes
    (and a block) are ever held, whatever the file's size or its longest line; the tail
    is read backwards from the end."""
    if head is not None and tail is not None:
        raise ToolError("give head or tail, not both")
    count = head if head is not None else tail
    if count is None or count < 0:
        raise ToolError("head and tail are counts of lines, 0 or more")
    fd = _open_regular(located)
    try:
        data = _head(fd, count) if head is not None else _tail(fd, count)
    except OSError as exc:
        raise describe_os_error(located.given, exc) from None
    finally:
        os.close(fd)
    return _decode(located, data, " in those lines")


_TOO_MANY = f"those lines are more than {MAX_READ} bytes; ask for fewer, or read a byte range (offset, length)"
_BLOCK = 64 * 1024


def _head(fd: int, count: int) -> bytes:
    kept: list[bytes] = []
    size = 0
    with os.fdopen(fd, "rb", closefd=False) as file:
        while len(kept) < count:
            line = file.readline(MAX_READ + 1 - size)  # never more than the bound, even with no newline
            if not line:
                break
            kept.append(line)
            size += len(line)
            if size > MAX_READ:
                raise ToolError(_TOO_MANY)
    return b"".join(kept)


def _tail(fd: int, count: int) -> bytes:
    if count == 0:
        return b""
    position = os.fstat(fd).st_size
    data = b""
    while position > 0:
        step = min(_BLOCK, position)
        position -= step
        data = os.pread(fd, step, position) + data
        # Newlines that end a line before the file's last: count of them means count lines.
        if data.count(b"\n", 0, len(data) - 1) >= count:
            break
        if len(data) - (data.find(b"\n") + 1) > MAX_READ:  # what would be kept is too much
            raise ToolError(_TOO_MANY)
    lines = _split_lines(data)
    kept = b"".join(lines[-count:])
    if len(kept) > MAX_READ:
        raise ToolError(_TOO_MANY)
    return kept


def _split_lines(data: bytes) -> list[bytes]:
    """``data`` cut after each ``\\n`` only (as iterating a binary file does)."""
    lines = [line + b"\n" for line in data.split(b"\n")]
    lines[-1] = lines[-1][:-1]
    return lines if lines[-1] else lines[:-1]


def write_text(located: Located, content: str) -> None:
    """Replace (or create) the file with ``content`` as UTF-8."""
    fd = open_confined(located, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, missing=_NO_DIRECTORY.format("write", located.given))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ToolError(f"cannot write {located.given!r}: it is not a regular file")
        data = content.encode("utf-8")
        written = 0
        while written < len(data):
            written += os.write(fd, data[written:])
    except OSError as exc:
        raise describe_os_error(located.given, exc) from None
    finally:
        os.close(fd)


def move(origin: Located, target: Located) -> None:
    """Rename ``origin`` to ``target`` by name between their parent directories, each
    walked from its root's descriptor; ``ToolError`` when the target exists already."""
    if target.is_root:
        raise ToolError(f"cannot move to {target.given!r}: it already exists")
    origin_dir = open_parent(origin)
    try:
        target_dir = open_parent(target, _NO_DIRECTORY.format("move to", target.given))
        try:
            _rename_no_replace(origin.real.name, origin_dir, target.real.name, target_dir)
        except FileExistsError:
            raise ToolError(f"cannot move to {target.given!r}: it already exists") from None
        except OSError as exc:
            raise describe_os_error(origin.given, exc) from None
        finally:
            os.close(target_dir)
    finally:
        os.close(origin_dir)


# renameat2(RENAME_NOREPLACE): the kernel refuses a rename onto an existing name, so no
# file another process creates at the destination between a check and the rename is
# replaced (a check then os.rename lost 1,508 such files in 6 s to a local creator,
# tests/servers/test_filesystem_races.py). The os module has no renameat2; glibc has had it
# since 2.28. Elsewhere, or on a filesystem that refuses the flag, the check comes first.
_RENAME_NOREPLACE = 1
_renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None) if sys.platform == "linux" else None


def _rename_no_replace(name: str, directory: int, new_name: str, new_directory: int) -> None:
    """Rename ``name`` (under ``directory``) to ``new_name`` (under ``new_directory``);
    ``FileExistsError`` when the new name exists, at the moment of the rename where the
    kernel can say so."""
    if _renameat2 is not None:
        if _renameat2(directory, os.fsencode(name), new_directory, os.fsencode(new_name), _RENAME_NOREPLACE) == 0:
            return
        code = ctypes.get_errno()
        if code not in (errno.EINVAL, errno.ENOSYS):  # EINVAL: a filesystem without the flag
            raise OSError(code, os.strerror(code), name)
    if _exists(new_name, new_directory):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), new_name)
    os.rename(name, new_name, src_dir_fd=directory, dst_dir_fd=new_directory)


def _exists(name: str, directory: int) -> bool:
    try:
        os.stat(name, dir_fd=directory, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True
