"""Files under the roots as ``file://`` resources, kept current by a watcher.

The first ``MAX_LISTED`` regular files (walked in name order from each root's
descriptor, as the tools walk, symlinks not followed)
are registered as resources, so ``resources/list`` shows them, page by page; the
template ``file:///{+path}`` reads any other file under a root. Both read through
``Roots.locate``, so a resource URI cannot reach outside a root either.

``watch`` runs for the server's lifespan: ``watchfiles`` reports changes (debounced),
a changed file sends ``resources/updated`` to its subscribers, and a file that appears
or disappears re-registers the listing, which sends ``list_changed`` (the server does
that for every registration). Both reach ``subscriptions/listen`` streams and
handshake-era sessions alike.
"""

from __future__ import annotations

import asyncio
import logging
import mimetypes
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from ...errors import ToolError
from ...server import EmbeddedResource, Server
from ._files import read_bytes
from ._paths import MAX_DEPTH, Located, Roots, walk

__all__ = ["FileResources"]

log = logging.getLogger("modelctx.servers.filesystem")

MAX_LISTED = 1000
DEBOUNCE_MS = 200
TICK_MS = 250
READY_TIMEOUT = 5.0


def _mime(name: str) -> str:
    return mimetypes.guess_type(name)[0] or "application/octet-stream"


def _contents(located: Located) -> str | bytes:
    data = read_bytes(located)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data


class FileResources:
    """The resources of one filesystem server: registration, reading, watching."""

    def __init__(self, server: Server, roots: Roots, *, max_listed: int = MAX_LISTED) -> None:
        self.server = server
        self.roots = roots
        self.max_listed = max_listed
        self.listed: dict[str, int] = {}  # real path: size
        server.resource("file:///{+path}", name="file", description="Any file under the allowed directories")(
            self._read_template
        )

    def _read_template(self, path: str) -> EmbeddedResource:
        contents = self._read("/" + path)
        uri, mime = _uri("/" + path), _mime(path)
        if isinstance(contents, str):
            return EmbeddedResource(uri, text=contents, mime_type=mime)
        return EmbeddedResource(uri, blob=contents, mime_type=mime)

    def _read(self, path: str) -> str | bytes:
        # A refused or missing path is a ToolError: the client reads its text (-32603).
        return _contents(self.roots.locate(path))

    def files(self) -> Iterator[tuple[str, int]]:
        """(real path, size) of regular files under the roots, in order, at most
        ``max_listed``; a tree deeper than a root may go is listed down to that depth."""
        count = 0
        for root in self.roots.roots:
            top = Located(str(root.path), root, root.path)
            try:
                for relative, entry in walk(top, lambda _relative, depth: depth <= MAX_DEPTH, self.max_listed + 1):
                    if not entry.is_file(follow_symlinks=False):
                        continue
                    try:
                        size = entry.stat(follow_symlinks=False).st_size
                    except OSError:  # gone since it was listed
                        continue
                    yield os.path.join(root.path, relative), size
                    count += 1
                    if count >= self.max_listed:
                        return
            except ToolError as exc:  # the root itself is gone or moved: nothing of it is listed
                log.warning("not listing the files of %s: %s", root.path, exc)

    async def sync(self) -> None:
        """Register the files now present and remove the ones gone. The walk runs on a
        thread; the registry changes on the loop, where requests read it."""
        present = dict(await asyncio.to_thread(lambda: list(self.files())))
        for gone in self.listed.keys() - present.keys():
            self.server.remove_resource(_uri(gone))
        for new in sorted(present.keys() - self.listed.keys()):
            self._register(new, present[new])
        self.listed = present

    def _register(self, path: str, size: int) -> None:
        def read() -> str | bytes:
            return self._read(path)

        self.server.resource(_uri(path), name=os.path.basename(path), title=path, mime_type=_mime(path), size=size)(
            read
        )

    @asynccontextmanager
    async def watching(self, _server: Any) -> AsyncIterator[None]:
        """The server's lifespan: the listing at start, and a watcher until it stops.
        Serving starts once the watcher watches, so no change after that is missed."""
        await self.sync()
        ready = asyncio.Event()
        task = asyncio.get_running_loop().create_task(self._watch(ready))
        try:
            await asyncio.wait_for(ready.wait(), READY_TIMEOUT)
        except TimeoutError:
            log.warning("the file watcher did not start within %ss; changes may be missed", READY_TIMEOUT)
        try:
            yield None
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _watch(self, ready: asyncio.Event) -> None:
        import watchfiles

        paths = [str(root.path) for root in self.roots.roots]
        # yield_on_timeout: an empty batch every TICK_MS, the first of which says the
        # watcher is running (watchfiles has no other "ready" signal).
        async for changes in watchfiles.awatch(
            *paths, debounce=DEBOUNCE_MS, watch_filter=None, rust_timeout=TICK_MS, yield_on_timeout=True
        ):
            ready.set()
            appeared_or_gone = False
            for change, path in changes:
                if change == watchfiles.Change.modified and os.path.isfile(path):
                    self.server.resource_updated(_uri(path))
                else:
                    appeared_or_gone = True
            if appeared_or_gone:
                await self.sync()


def _uri(path: str) -> str:
    return Path(path).as_uri()
