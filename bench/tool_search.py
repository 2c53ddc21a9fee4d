"""Many tools in a small context, measured: bytes of tool definitions per model request
with and without the search tool, and how often a task's tool is in the first 5 results.

    .venv/bin/python bench/tool_search.py            # prints a table; --json for one JSON object

Twenty in-process servers, 500 tools (``many_tools.py``), joined by a real ``Host``. For
each task of ``many_tools.TASKS`` a scripted model (in this process: what it is shown is
what the provider adapters would send) runs the conversation a model runs: it searches
with the person's words, calls the task's tool when it is among the first 5 results (else
the first result), then answers. The bytes are those of the Anthropic Messages API tool
definitions (``host._anthropic.to_tool``) and of Chat Completions (``host._openai.to_tool``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import many_tools  # noqa: E402

from modelctx.host._anthropic import to_tool as anthropic_tool  # noqa: E402
from modelctx.host._model import AssistantMessage, Conversation, ModelLoop, TextDelta, ToolCall, ToolResults  # noqa: E402
from modelctx.host._openai import to_tool as openai_tool  # noqa: E402
from modelctx.protocol.types.v2026_07_28 import Tool  # noqa: E402


def definition_bytes(tools: Sequence[Tool]) -> tuple[int, int]:
    """(Anthropic, OpenAI) bytes of the tool definitions of one request."""
    return (
        len(json.dumps([anthropic_tool(t) for t in tools]).encode()),
        len(json.dumps([openai_tool(t) for t in tools]).encode()),
    )


class SearchingModel:
    """Searches with the task's words, calls the intended tool if found (else the first
    result), answers. Records the tools of every request."""

    def __init__(self, task: str, intended: str) -> None:
        self.task, self.intended = task, intended
        self.requests: list[list[Tool]] = []
        self.found: list[str] = []

    async def stream(
        self, conversation: Conversation, tools: Sequence[Tool]
    ) -> AsyncIterator[TextDelta | AssistantMessage]:
        self.requests.append(list(tools))
        step = len(self.requests)
        if step == 1:
            yield AssistantMessage(tool_calls=(ToolCall("s1", "search_tools", {"query": self.task}),))
        elif step == 2:
            last = conversation.messages[-1]
            assert isinstance(last, ToolResults)
            self.found = [t["name"] for t in last.results[0].result.structured_content["tools"]]  # type: ignore[index]
            pick = self.intended if self.intended in self.found else (self.found or ["none"])[0]
            yield AssistantMessage(tool_calls=(ToolCall("c1", pick, {}),))
        else:
            yield AssistantMessage("done")


async def measure() -> dict[str, Any]:
    async with many_tools.many_tools_host() as host:
        started = time.perf_counter()
        every = await host.tools()
        listed_ms = (time.perf_counter() - started) * 1000
        full = definition_bytes(every)
        per_request: list[tuple[int, int]] = []
        hits, misses, search_ms = 0, [], []
        loop_ms = []
        for task, intended in many_tools.TASKS:
            model = SearchingModel(task, intended)
            loop = ModelLoop(host, model)
            began = time.perf_counter()
            [event async for event in loop.run(Conversation(), task)]
            loop_ms.append((time.perf_counter() - began) * 1000)
            per_request.extend(definition_bytes(tools) for tools in model.requests)
            if intended in model.found:
                hits += 1
            else:
                misses.append({"task": task, "intended": intended, "found": model.found})
            began = time.perf_counter()
            loop.tool_search.search(task, 5)
            search_ms.append((time.perf_counter() - began) * 1000)
        return {
            "servers": len(host.servers),
            "tools": len(every),
            "bytes_without_search": {"anthropic": full[0], "openai": full[1]},
            "bytes_with_search_mean": {
                "anthropic": round(statistics.mean(b[0] for b in per_request)),
                "openai": round(statistics.mean(b[1] for b in per_request)),
            },
            "bytes_with_search_max": {
                "anthropic": max(b[0] for b in per_request),
                "openai": max(b[1] for b in per_request),
            },
            "requests": len(per_request),
            "tasks": len(many_tools.TASKS),
            "hits_at_5": hits,
            "hit_rate_at_5": round(hits / len(many_tools.TASKS), 3),
            "misses": misses,
            "search_ms_median": round(statistics.median(search_ms), 3),
            "host_tools_ms": round(listed_ms, 1),
            "three_turn_conversation_ms_median": round(statistics.median(loop_ms), 1),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    figures = asyncio.run(measure())
    if parser.parse_args().json:
        print(json.dumps(figures, indent=2))
        return
    a, o = figures["bytes_without_search"], figures["bytes_with_search_mean"]
    m = figures["bytes_with_search_max"]
    print(
        f"{figures['servers']} servers, {figures['tools']} tools, {figures['tasks']} tasks, {figures['requests']} requests"
    )
    print(f"{'tool definitions per request':32} {'anthropic':>10} {'openai':>10}")
    print(f"{'  without search (every tool)':32} {a['anthropic']:>10,} {a['openai']:>10,}")
    print(f"{'  with search, mean':32} {o['anthropic']:>10,} {o['openai']:>10,}")
    print(f"{'  with search, largest':32} {m['anthropic']:>10,} {m['openai']:>10,}")
    print(
        f"intended tool in the first 5 results: {figures['hits_at_5']}/{figures['tasks']} ({figures['hit_rate_at_5']:.0%})"
    )
    print(
        f"search median {figures['search_ms_median']} ms; host.tools() {figures['host_tools_ms']} ms; "
        f"a 3-turn conversation median {figures['three_turn_conversation_ms_median']} ms"
    )
    for miss in figures["misses"]:
        print(f"  miss: {miss['task']!r} wanted {miss['intended']}, got {miss['found']}")


if __name__ == "__main__":
    main()
