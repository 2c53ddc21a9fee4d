"""The tools that only read: names and arguments as the npm reference server has them, plus more.

Each is a plain function, so it runs on a worker thread and may block on the disk.
"""

from __future__ import annotations

import fnmatch
import json
import mimetypes
import os
import re
import stat
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal, NamedTuple, TypedDict, TypeVar

from ...errors import ToolError
from ...server import Audio, EmbeddedResource, Image, Server
from ._files import MAX_READ, read_bytes, read_lines, read_text
from ._paths import MAX_DEPTH, Located, Roots, open_confined, stat_located, walk
from ._regex_search import RegexMatcher

__all__ = ["register_read_tools", "tool"]

F = TypeVar("F", bound=Callable[..., Any])
LineMatcher = Callable[[list[str], int], list[tuple[int, str]]]  # (lines, limit) -> (number, line)s

READ_ONLY = {"readOnlyHint": True, "openWorldHint": False}
MAX_ENTRIES = 10_000  # listings, trees and searches stop here and say so
MAX_SEARCH_FILE = 1024 * 1024  # content search skips larger files


class FileInfo(TypedDict):
    path: str
    type: Literal["file", "directory", "symlink", "other"]
    size: int
    created: str
    modified: str
    accessed: str
    permissions: str


class Match(TypedDict):
    path: str
    line: int
    text: str


class ContentMatches(TypedDict):
    matches: list[Match]
    truncated: bool
    skipped: list[str]


def tool(server: Server, **options: Any) -> Callable[[F], F]:
    """``@server.tool(...)`` with its type kept (``server.tool`` returns ``Any``)."""

    def register(fn: F) -> F:
        server.add_tool(fn, **options)
        return fn

    return register


def _time(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat()


class Entry(NamedTuple):
    name: str
    is_dir: bool
    size: int


def _entries(located: Located) -> list[Entry]:
    """The directory's entries, read through its descriptor (sizes by name under it, a link not followed)."""
    found: list[Entry] = []
    for name, entry in walk(located, lambda _relative, _depth: False, MAX_ENTRIES + 1):
        is_dir = entry.is_dir(follow_symlinks=False)
        found.append(Entry(name, is_dir, 0 if is_dir else _size(entry)))
    if len(found) > MAX_ENTRIES:
        raise ToolError(f"{located.given!r} has more than {MAX_ENTRIES} entries; search it instead")
    return found


def _size(entry: os.DirEntry[str]) -> int:
    try:
        return entry.stat(follow_symlinks=False).st_size
    except OSError:
        return 0


def _excluded(relative: str, patterns: list[str]) -> bool:
    name = relative.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatch(relative, p) or fnmatch.fnmatch(name, p) for p in patterns)


def _walk(
    located: Located, exclude: list[str], max_depth: int | None, too_deep: list[str] | None = None
) -> list[tuple[str, bool]]:
    """(relative path, is directory) under ``located``, symlinks listed and not followed,
    bounded in entries and in depth: a directory more than ``MAX_DEPTH`` levels below the
    root is not entered; it goes to ``too_deep``, or without that list, the walk is refused."""
    below_root = len(located.real.relative_to(located.root.path).parts)

    def enter(relative: str, depth: int) -> bool:
        if _excluded(relative, exclude) or (max_depth is not None and depth >= max_depth):
            return False
        if below_root + depth <= MAX_DEPTH:
            return True
        if too_deep is None:
            raise ToolError(
                f"{located.given!r} has directories more than {MAX_DEPTH} levels below its root, "
                "deeper than this server goes; give maxDepth"
            )
        too_deep.append(str(located.real / relative))
        return False

    found: list[tuple[str, bool]] = []
    for relative, entry in walk(located, enter, MAX_ENTRIES + 1):
        if not _excluded(relative, exclude):
            found.append((relative, entry.is_dir(follow_symlinks=False)))
        if len(found) > MAX_ENTRIES:
            raise ToolError(f"more than {MAX_ENTRIES} entries under {located.given!r}; narrow the path or exclude some")
    return sorted(found)


def _tree(pairs: list[tuple[str, bool]]) -> list[dict[str, Any]]:
    top: list[dict[str, Any]] = []
    nodes: dict[str, list[dict[str, Any]]] = {"": top}
    for relative, is_dir in pairs:
        parent, _, name = relative.rpartition("/")
        node: dict[str, Any] = {"name": name, "type": "directory" if is_dir else "file"}
        if is_dir:
            node["children"] = nodes[relative] = []
        nodes.setdefault(parent, []).append(node)
    return top


def _media(located: Located) -> Image | Audio | EmbeddedResource:
    data = read_bytes(located)
    mime = mimetypes.guess_type(located.real.name)[0] or "application/octet-stream"
    if mime.startswith("image/"):
        return Image(data, mime)
    if mime.startswith("audio/"):
        return Audio(data, mime)
    return EmbeddedResource(located.real.as_uri(), blob=data, mime_type=mime)


def _compile(query: str, regex: bool, case_sensitive: bool) -> re.Pattern[str]:
    flags = 0 if case_sensitive else re.IGNORECASE
    try:
        return re.compile(query if regex else re.escape(query), flags)
    except re.error as exc:
        raise ToolError(f"the regular expression {query!r} is not valid: {exc}") from None


def _in_process(pattern: re.Pattern[str]) -> LineMatcher:
    """A matcher for an escaped (literal) pattern: it cannot backtrack, so it runs here."""

    def matches(lines: list[str], limit: int) -> list[tuple[int, str]]:
        hits: list[tuple[int, str]] = []
        for number, line in enumerate(lines, 1):
            if len(hits) >= limit:
                break
            if pattern.search(line):
                hits.append((number, line))
        return hits

    return matches


def _search_file(file: Located, match: LineMatcher, limit: int, found: list[Match]) -> bool:
    """Append the matching lines of one file; False when it is binary, too large or
    cannot be read (skipped). Opened as every file is: no symlink swapped in is followed."""
    try:
        fd = open_confined(file, os.O_RDONLY)
    except ToolError:
        return False
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_SEARCH_FILE:
            return False
        data = os.pread(fd, MAX_SEARCH_FILE, 0)
    finally:
        os.close(fd)
    if b"\x00" in data[:8192]:
        return False
    path = str(file.real)
    lines = data.decode("utf-8", errors="replace").splitlines()
    for number, line in match(lines, limit - len(found)):
        found.append({"path": path, "line": number, "text": line[:500]})
    return True


def _search_files(
    files: list[Located], match: LineMatcher, limit: int, found: list[Match], skipped: list[str]
) -> None:
    for file in files:
        if len(found) >= limit:
            return
        if not _search_file(file, match, limit, found):
            skipped.append(str(file.real))


def register_read_tools(server: Server, roots: Roots) -> None:
    """Add the reading tools to ``server``, confined to ``roots`` (listed in this order)."""
    _register_reads(server, roots)
    _register_listings(server, roots)
    _register_searches(server, roots)
    _register_info(server, roots)


def _register_reads(server: Server, roots: Roots) -> None:
    """read_text_file, read_file, read_media_file, read_multiple_files."""

    @tool(server, annotations=READ_ONLY)
    def read_text_file(
        path: str, head: int | None = None, tail: int | None = None, offset: int = 0, length: int | None = None
    ) -> str:
        """Read a UTF-8 text file. head/tail: only the first/last N lines (any file
        size); offset/length: a byte range. Without a range, files up to 4 MiB."""
        located = roots.locate(path)
        if head is not None or tail is not None:
            return read_lines(located, head, tail)
        return read_text(located, offset, length)

    @tool(server, annotations=READ_ONLY)
    def read_file(path: str, head: int | None = None, tail: int | None = None) -> str:
        """Read a text file (the npm server's older name; use read_text_file)."""
        located = roots.locate(path)
        return read_lines(located, head, tail) if head is not None or tail is not None else read_text(located)

    @tool(server, annotations=READ_ONLY)
    def read_media_file(path: str) -> Image | Audio | EmbeddedResource:
        """Read an image or audio file (base64 content with its MIME type); other
        binary files come back as an embedded blob resource."""
        return _media(roots.locate(path))

    @tool(server, annotations=READ_ONLY)
    def read_multiple_files(paths: list[str]) -> str:
        """Read several text files at once (at most 100, 4 MiB in all); a file that fails,
        or would pass the 4 MiB, is reported in its place."""
        return _read_many(roots, paths)


def _register_listings(server: Server, roots: Roots) -> None:
    """list_directory, list_directory_with_sizes, directory_tree."""

    @tool(server, annotations=READ_ONLY)
    def list_directory(path: str) -> str:
        """List a directory: one line per entry, [FILE] or [DIR] then its name."""
        entries = _entries(roots.locate(path))
        return "\n".join(f"{'[DIR]' if e.is_dir else '[FILE]'} {e.name}" for e in entries)

    @tool(server, annotations=READ_ONLY)
    def list_directory_with_sizes(path: str, sortBy: Literal["name", "size"] = "name") -> str:  # noqa: N803
        """List a directory with file sizes, sorted by name or by size (largest first)."""
        return _sized_listing(roots.locate(path), sortBy)

    @tool(server, annotations=READ_ONLY)
    def directory_tree(
        path: str, excludePatterns: list[str] | None = None, maxDepth: int | None = None  # noqa: N803
    ) -> str:
        """The tree under a directory as JSON ({name, type, children}); symlinks are not
        followed; maxDepth limits how deep it goes."""
        pairs = _walk(roots.locate(path), excludePatterns or [], maxDepth)
        return json.dumps(_tree(pairs), indent=2)


def _register_searches(server: Server, roots: Roots) -> None:
    """search_files, search_file_contents."""

    @tool(server, annotations=READ_ONLY)
    def search_files(path: str, pattern: str, excludePatterns: list[str] | None = None) -> str:  # noqa: N803
        """Find files and directories under a path whose path or name matches a glob
        (e.g. "*.py", "**/test_*"); one full path per line."""
        located = roots.locate(path)
        too_deep: list[str] = []
        hits = [
            str(located.real / relative)
            for relative, _ in _walk(located, excludePatterns or [], None, too_deep)
            if fnmatch.fnmatch(relative, pattern) or fnmatch.fnmatch(relative.rsplit("/", 1)[-1], pattern)
        ]
        text = "\n".join(hits) if hits else "No matches found"
        if too_deep:
            text += f"\n(not searched, more than {MAX_DEPTH} levels below the root: {', '.join(too_deep[:10])})"
        return text

    @tool(server, annotations=READ_ONLY)
    def search_file_contents(
        path: str,
        query: str,
        regex: bool = False,
        caseSensitive: bool = True,  # noqa: N803
        include: str = "*",
        maxResults: int = 200,  # noqa: N803
    ) -> ContentMatches:
        """Search the text of files under a path for a literal string (or a regular
        expression with regex=true, stopped after 10 s); binary files and files over 1 MiB
        are skipped."""
        return _search_contents(roots.locate(path), query, regex, caseSensitive, include, maxResults)


def _register_info(server: Server, roots: Roots) -> None:
    """get_file_info, list_allowed_directories."""

    @tool(server, annotations=READ_ONLY)
    def get_file_info(path: str) -> FileInfo:
        """Size, times, type and permissions of a file or directory (a symlink is described, not followed)."""
        return _file_info(roots.locate(path))

    @tool(server, annotations=READ_ONLY)
    def list_allowed_directories() -> str:
        """The directories this server may read (and, unless read-only, write)."""
        return "Allowed directories:\n" + "\n".join(str(root.path) for root in roots.roots)


def _read_many(roots: Roots, paths: list[str]) -> str:
    """read_multiple_files: each file's text under its path, or why it was not read."""
    if len(paths) > 100:
        raise ToolError("read at most 100 files at once")
    parts = []
    total = 0  # one file may be 4 MiB; so may all of them together, not 100 times that
    for path in paths:
        try:
            text = read_text(roots.locate(path))
            size = len(text.encode("utf-8", errors="surrogateescape"))
            if total + size > MAX_READ:
                raise ToolError(f"not read: with it this call would return more than {MAX_READ} bytes; read it in another call")
            total += size
            parts.append(f"{path}:\n{text}\n")
        except ToolError as exc:
            parts.append(f"{path}: Error - {exc}")
    return "\n---\n".join(parts)


def _sized_listing(located: Located, sort_by: str) -> str:
    """list_directory_with_sizes: one line per entry, then the totals."""
    entries = _entries(located)
    if sort_by == "size":
        entries.sort(key=lambda e: e.size, reverse=True)
    lines = [f"[DIR]  {e.name}" if e.is_dir else f"[FILE] {e.name:<30} {e.size:>10} bytes" for e in entries]
    files = [e for e in entries if not e.is_dir]
    lines.append(
        f"\nTotal: {len(files)} files, {len(entries) - len(files)} directories, {sum(e.size for e in files)} bytes"
    )
    return "\n".join(lines)


def _search_contents(
    located: Located, query: str, regex: bool, case_sensitive: bool, include: str, max_results: int
) -> ContentMatches:
    """search_file_contents: the matching lines under ``located``, at most ``max_results``."""
    pattern = _compile(query, regex, case_sensitive)
    found: list[Match] = []
    skipped: list[str] = []  # directories too deep to enter first, then files not read
    files = [
        Located(relative, located.root, located.real / relative)
        for relative, is_dir in _walk(located, [], None, skipped)
        if not is_dir and fnmatch.fnmatch(relative.rsplit("/", 1)[-1], include)
    ]
    if not regex:
        _search_files(files, _in_process(pattern), max_results, found, skipped)
    else:
        with RegexMatcher(pattern.pattern, pattern.flags) as matcher:
            _search_files(files, matcher.matches, max_results, found, skipped)
    return {"matches": found, "truncated": len(found) >= max_results, "skipped": skipped}


def _file_info(located: Located) -> FileInfo:
    """get_file_info: what ``stat`` says of ``located`` (a symlink itself, not its target)."""
    info = stat_located(located)
    kind: Literal["file", "directory", "symlink", "other"] = (
        "file" if stat.S_ISREG(info.st_mode)
        else "directory" if stat.S_ISDIR(info.st_mode)
        else "symlink" if stat.S_ISLNK(info.st_mode)
        else "other"
    )
    return {
        "path": str(located.real),
        "type": kind,
        "size": info.st_size,
        "created": _time(info.st_ctime),
        "modified": _time(info.st_mtime),
        "accessed": _time(info.st_atime),
        "permissions": oct(stat.S_IMODE(info.st_mode))[2:],
    }
