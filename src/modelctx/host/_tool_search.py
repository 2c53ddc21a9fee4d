"""Many tools in a small context: past a budget, the model is offered a search tool instead of every tool.

Theory of operation. ``ToolSearch.offer(conversation, tools)`` chooses the tools shown in
one model request. While every tool's definition fits the budget (``ToolBudget``: at most
``max_tools`` tools and ``max_bytes`` of their JSON) they are all shown, unchanged. Past it
the model is shown the search tool (``search_tools``), the tools pinned in the
configuration, the tools it called earlier in the conversation, and the tools its recent
searches found; nothing else. A search runs over every tool's name, title, description and
parameter names (BM25, SQLite FTS5 in memory, Porter stemming: "issues" finds "issue") and
answers the best few with their descriptions; their definitions are in the next request,
so the model calls a found tool in its next turn (a call by name works at once too: the
loop routes every tool the tool set has, shown or not).

What is offered is derived from the conversation itself (the calls it holds and the
search results it holds), not kept here: a conversation saved and resumed, or run by
another loop, is offered the same tools. The index is rebuilt when the tool set's
definitions change (a server's ``list_changed`` or an expired ``ttlMs``: the host's
``tools()`` is fresh each step, and the index follows what it returns).
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from ..protocol.types.v2026_07_28 import CallToolResult, TextContent, Tool, ToolAnnotations

if TYPE_CHECKING:
    from ._model import Conversation, ToolCall

__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_MAX_TOOLS", "SEARCH_OWNER", "SEARCH_TOOL", "ToolBudget", "ToolSearch"]

#: Past this many tools a model picks worse (the issue: "40 tools where 2 are needed").
DEFAULT_MAX_TOOLS = 40
#: 32 KiB of tool JSON is about 8k tokens (about 4 bytes a token for JSON schemas): 40 tools
#: of a typical 800 bytes. That is 4% of a 200k-token window, and leaves a 32k-token local
#: model three quarters of its window; a few servers with long descriptions reach it with
#: far fewer than 40 tools, which is why the budget counts bytes as well.
DEFAULT_MAX_BYTES = 32 * 1024
SEARCH_TOOL = "search_tools"
#: What ``ToolCallRequested.server`` says for a search: the host answers it, not a server.
SEARCH_OWNER = "(host)"


@dataclass(frozen=True)
class ToolBudget:
    """How many tool definitions one model request may carry before search takes over.

    ``max_tools``/``max_bytes``: the budget (``None``: no bound of that kind); ``pinned``:
    shell-style globs over the tools' (namespaced) names that are always shown;
    ``results``: search results the model gets by default; ``keep_found``: how many tools
    found by earlier searches stay shown (the most recent); ``enabled`` False: never search."""

    max_tools: int | None = DEFAULT_MAX_TOOLS
    max_bytes: int | None = DEFAULT_MAX_BYTES
    pinned: tuple[str, ...] = ()
    results: int = 5
    keep_found: int = 15
    enabled: bool = True

    @classmethod
    def from_config(cls, value: object) -> ToolBudget:
        """The ``"toolSearch"`` setting of a host configuration: ``false`` (never search),
        or ``{"maxTools": 40, "maxBytes": 32768, "pinned": ["github_*"], "results": 5}``.
        Raises ``ValueError`` naming the key."""
        if value is None:
            return cls()
        if value is False:
            return cls(enabled=False)
        if not isinstance(value, dict):
            raise ValueError(f"'toolSearch' must be false or an object, not {value!r}")
        keys = {"maxTools", "maxBytes", "pinned", "results", "keepFound"}
        unknown = sorted(set(value) - keys)
        if unknown:
            raise ValueError(f"'toolSearch': unknown key {unknown[0]!r}; the keys are {sorted(keys)}")
        pinned = value.get("pinned", [])
        if not isinstance(pinned, list) or not all(isinstance(p, str) and p for p in pinned):
            raise ValueError("'toolSearch.pinned' must be a list of tool names or globs, such as [\"github_*\"]")
        return cls(
            max_tools=_count(value, "maxTools", DEFAULT_MAX_TOOLS, none_ok=True),
            max_bytes=_count(value, "maxBytes", DEFAULT_MAX_BYTES, none_ok=True),
            pinned=tuple(pinned),
            results=_count(value, "results", 5, least=1),
            keep_found=_count(value, "keepFound", 15),
        )

    def exceeded_by(self, tools: Sequence[Tool]) -> bool:
        if not self.enabled:
            return False
        if self.max_tools is not None and len(tools) > self.max_tools:
            return True
        return self.max_bytes is not None and definition_bytes(tools) > self.max_bytes


def _count(value: dict[str, Any], key: str, default: int, none_ok: bool = False, least: int = 0) -> Any:
    got = value.get(key, default)
    if got is None and none_ok:
        return None
    if isinstance(got, bool) or not isinstance(got, int) or got < least:
        also = " (or null: no bound)" if none_ok else ""
        raise ValueError(f"'toolSearch.{key}' must be a whole number of at least {least}{also}, not {got!r}")
    return got


def definition_bytes(tools: Iterable[Tool]) -> int:
    """The size of the tools' MCP JSON: near what a provider sends (it renames a key or two)."""
    return sum(len(msgspec.json.encode(tool)) for tool in tools)


class ToolSearch:
    """Chooses the tools of each model request (``offer``) and answers the search tool
    (``answer``). One per ``ModelLoop``; ``for_toolset`` reads the budget a ``Host``'s
    configuration gives (``"toolSearch"``)."""

    def __init__(self, budget: ToolBudget | None = None) -> None:
        self.budget = budget or ToolBudget()
        self.name = SEARCH_TOOL
        self._index: _Index | None = None  # made at the first offer past the budget
        self._tools: Mapping[str, Tool] = {}
        self._searching = False

    @classmethod
    def for_toolset(cls, toolset: object) -> ToolSearch:
        config = getattr(toolset, "config", None)
        return cls(getattr(config, "tool_search", None))

    def offer(self, conversation: Conversation, tools: Mapping[str, Tool]) -> list[Tool]:
        """The tools to show in the next request: all of ``tools`` within the budget; else
        the search tool, then the pinned, used and found tools (pinned ones whatever the
        budget; the others, most recent first, while they fit)."""
        self._tools = tools
        self._searching = self.budget.exceeded_by(list(tools.values()))
        if not self._searching:
            return list(tools.values())
        self.name = _free_name(SEARCH_TOOL, tools)
        self._indexed()
        shown = [self._definition(len(tools))]
        shown += [t for name, t in tools.items() if any(fnmatch.fnmatchcase(name, p) for p in self.budget.pinned)]
        for name in self._recent(conversation):
            if name in tools and tools[name] not in shown:
                if self.budget.exceeded_by([*shown, tools[name]]):
                    break
                shown.append(tools[name])
        return shown

    def _recent(self, conversation: Conversation) -> list[str]:
        """Tools called, then tools found, most recent first (found ones: the last ``keep_found``)."""
        from ._model import AssistantMessage, ToolResults

        used: list[str] = []
        found: list[str] = []
        for message in reversed(conversation.messages):
            if isinstance(message, AssistantMessage):
                used.extend(call.name for call in message.tool_calls if call.name != self.name)
            elif isinstance(message, ToolResults):
                for result in message.results:
                    if result.call.name == self.name and len(found) < self.budget.keep_found:
                        found.extend(_found_names(result.result)[: self.budget.keep_found - len(found)])
        return list(dict.fromkeys([*used, *found]))

    def answers(self, name: str) -> bool:
        """Whether a call of ``name`` is the search tool's (the last ``offer`` showed it)."""
        return self._searching and name == self.name

    def answer(self, call: ToolCall) -> CallToolResult | None:
        """The result of ``call`` when it is for the search tool (or, while searching, for a
        tool no server has: the model is told to search); ``None`` for the loop to run it."""
        if not self._searching:
            return None
        if call.name == self.name:
            query = call.arguments.get("query")
            limit = call.arguments.get("limit", self.budget.results)
            if not isinstance(query, str) or not query.strip():
                return _error(f"{self.name} needs a 'query': a few words of what you want to do")
            if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 20:
                return _error(f"{self.name}: 'limit' must be a whole number from 1 to 20, not {limit!r}")
            return self._results(query, self.search(query, limit))
        if call.name not in self._tools:
            return _error(
                f"there is no tool named {call.name!r}; call {self.name} with a few words of what you want to "
                "do to find the right one"
            )
        return None

    def search(self, query: str, limit: int = 5) -> list[Tool]:
        """The tools that best match ``query``, best first (of the tools of the last ``offer``)."""
        return [self._tools[name] for name in self._indexed().search(query, limit) if name in self._tools]

    def _indexed(self) -> _Index:
        if self._index is None:
            self._index = _Index()
        self._index.refresh(self._tools.values())
        return self._index

    def _results(self, query: str, found: list[Tool]) -> CallToolResult:
        listing = [
            {"name": tool.name, "description": _text(tool.description)[:300], "parameters": _parameters(tool)}
            for tool in found
        ]
        if not listing:
            note = f"no tool matches {query[:200]!r}; try other words (what the tool does, or the service's name)"
        else:
            note = "these tools' definitions are loaded for your next turn: call one by its name"
        structured = {"tools": listing, "note": note}
        return CallToolResult(
            content=[TextContent(text=json.dumps(structured, ensure_ascii=False))],
            structured_content=structured,
            result_type="complete",
        )

    def _definition(self, count: int) -> Tool:
        return Tool(
            name=self.name,
            description=(
                f"Search the {count} tools of the connected servers; only a few are shown here. Give a few "
                "keywords of what you want to do (the service, the action, the thing: 'github create issue'). "
                "The best matches come back with their descriptions and are loaded so that you can call them."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "keywords of the task, e.g. 'calendar free slot'"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 20, "description": "results (default 5)"},
                },
                "required": ["query"],
            },
            annotations=ToolAnnotations(read_only_hint=True),
        )


def _free_name(name: str, tools: Mapping[str, Tool]) -> str:
    """``name``, or ``name_2``... when a server's tool already has it."""
    candidate, n = name, 1
    while candidate in tools:
        n += 1
        candidate = f"{name}_{n}"
    return candidate


def _found_names(result: CallToolResult) -> list[str]:
    structured: Any = result.structured_content
    if structured is msgspec.UNSET and result.content and isinstance(result.content[0], TextContent):
        # A conversation kept without structured content (a saved one, say): its text is the same JSON.
        try:
            structured = json.loads(result.content[0].text)
        except ValueError:
            return []
    if not isinstance(structured, dict) or not isinstance(structured.get("tools"), list):
        return []
    return [t["name"] for t in structured["tools"] if isinstance(t, dict) and isinstance(t.get("name"), str)]


def _error(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(text=text)], is_error=True, result_type="complete")


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _parameters(tool: Tool) -> list[str]:
    properties = tool.input_schema.get("properties")
    return [str(key) for key in properties] if isinstance(properties, dict) else []


# -- the index ----------------------------------------------------------------------------------

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_WORD = re.compile(r"[^\W_]+")  # letters and digits of any script; never a quote
# Words that say nothing about which tool is meant; BM25 would weigh them little, but a
# query of only these would match every tool.
_STOP = frozenset(
    "a an and are as at be by can could do for from get i in into is it me my of on or please some "
    "that the this to up want we with would you your".split()
)


def _words(text: str) -> str:
    """Snake, kebab and camel case split into words: 'listPullRequests' -> 'list Pull Requests'."""
    return " ".join(_CAMEL.sub(" ", piece) for piece in _WORD.findall(text))


class _Index:
    """Every tool's words in an in-memory FTS5 table, rebuilt when the definitions change."""

    def __init__(self) -> None:
        import sqlite3  # here, not at import: a host that never searches does not load it

        self._db = sqlite3.connect(":memory:")
        self._db.execute(
            "CREATE VIRTUAL TABLE tools USING fts5(name, title, description, parameters, key UNINDEXED, "
            "tokenize='porter unicode61')"
        )
        self._fingerprint = b""

    def refresh(self, tools: Iterable[Tool]) -> None:
        import hashlib

        listed = list(tools)
        # msgspec encodes 500 tools in well under a millisecond; splitting their words does not.
        fingerprint = hashlib.sha256(msgspec.json.encode(listed)).digest()
        if fingerprint == self._fingerprint:
            return
        rows = [
            (
                _words(tool.name),
                _words(_text(tool.title)),
                _words(_text(tool.description)),
                " ".join(_words(p) for p in _parameters(tool)),
                tool.name,
            )
            for tool in listed
        ]
        with self._db:
            self._db.execute("DELETE FROM tools")
            self._db.executemany("INSERT INTO tools VALUES (?, ?, ?, ?, ?)", rows)
        self._fingerprint = fingerprint

    def search(self, query: str, limit: int) -> list[str]:
        # The first 64 distinct words: a task is a sentence, and a model that sends a page
        # should not make each search an OR of thousands of terms.
        words = list(dict.fromkeys(w for w in _words(query[:4096]).lower().split() if w not in _STOP))[:64]
        if not words:
            return []
        # Each word quoted (no FTS5 syntax from the model gets through), any may match;
        # name and title count more than the description.
        match = " OR ".join(f'"{word}"' for word in words)
        rows = self._db.execute(
            "SELECT key FROM tools WHERE tools MATCH ? ORDER BY bm25(tools, 4.0, 2.0, 1.0, 0.5) LIMIT ?",
            (match, limit),
        )
        return [key for (key,) in rows]
