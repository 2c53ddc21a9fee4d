"""A server whose handlers ask the client for input (multi round-trip requests).

Used in process (``Client(server)``) and as a real subprocess (``modelctx serve
tests/servers/mrtr_server.py``, on stdio or ``--http``) by
``tests/test_elicitation_validation.py`` and ``tests/test_mrtr_rounds.py``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, TypedDict

import msgspec
import pydantic

from modelctx import Context, Server, ToolError

server = Server("mrtr-server", version="0.0.1")

RUNS: dict[str, int] = {}  # how many times each handler started, in this process


def count_run(name: str) -> None:
    RUNS[name] = RUNS.get(name, 0) + 1


AGE_FORM = {
    "type": "object",
    "properties": {"age": {"type": "integer", "minimum": 0}},
    "required": ["age"],
}


# -- forms from types ------------------------------------------------------------------------
@dataclasses.dataclass
class Person:
    name: str
    age: int
    colour: Literal["red", "green"] = "red"
    nickname: str | None = None


class PersonDict(TypedDict):
    name: str
    age: int


class PersonStruct(msgspec.Struct):
    name: str
    age: int


class PersonModel(pydantic.BaseModel):
    name: str = pydantic.Field(min_length=2)
    age: int = pydantic.Field(ge=0)


@dataclasses.dataclass
class Address:
    street: str


@dataclasses.dataclass
class Customer:
    name: str
    address: Address


FORM_TYPES: dict[str, Any] = {
    "dataclass": Person,
    "typeddict": PersonDict,
    "struct": PersonStruct,
    "pydantic": PersonModel,
    "dict": {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name", "age"],
    },
}


@server.tool
async def typed_form(kind: str, ctx: Context) -> str:
    """Ask for a person with the schema of ``kind``; say what the handler received."""
    answer = await ctx.elicit("Who are you?", FORM_TYPES[kind])
    if not answer.accepted:
        return answer.action
    content = answer.content
    name = content["name"] if isinstance(content, dict) else content.name
    age = content["age"] if isinstance(content, dict) else content.age
    return f"{type(content).__name__}: {name}, {age}"


@server.tool
async def age_form(ctx: Context) -> str:
    """One dict-schema question: an integer age of at least 0."""
    answer = await ctx.elicit("How old are you?", AGE_FORM)
    return f"{answer.action} {answer.content}"


@server.tool
async def nested_form(ctx: Context) -> str:
    """Ask with a schema that is not flat (a nested dataclass): the handler sees why."""
    try:
        await ctx.elicit("Where do you live?", Customer)
    except TypeError as exc:
        raise ToolError(f"refused: {exc}") from None
    return "asked"


# -- several rounds ---------------------------------------------------------------------------
@server.tool
async def register(ctx: Context) -> str:
    """Two questions in turn, with logs and progress before, between and after them."""
    count_run("register")
    await ctx.info("starting registration")
    await ctx.report_progress(1, 3, "asking the name")
    who = await ctx.elicit(
        "What is your name?",
        {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
        key="name",
    )
    if not who.accepted:
        return f"registration: {who.action}"
    name = who.content["name"]
    await ctx.info(f"got the name {name}")
    await ctx.report_progress(2, 3, "asking the age")
    age = await ctx.elicit(f"How old are you, {name}?", AGE_FORM, key="age")
    await ctx.info("registered")
    await ctx.report_progress(3, 3, "done")
    return f"registered {name}, aged {age.content['age'] if age.content else '?'}"


@server.tool
async def runs(name: str) -> int:
    """How many times the handler ``name`` started in this process."""
    return RUNS.get(name, 0)


@server.tool
async def slow_job(steps: int, ctx: Context) -> str:
    """Work that is not done in one attempt: each attempt does one step and asks to be
    retried, carrying how far it got, until ``steps`` are done."""
    count_run("slow_job")
    done = (ctx.retry_state or {}).get("done", 0)
    await ctx.info(f"attempt after step {done}")
    if done < steps:
        ctx.retry_later({"done": done + 1})
    return f"finished {done} steps"


@server.prompt
async def greeting(ctx: Context) -> str:
    """A prompt that asks the user's name first (prompts/get is MRTR-capable)."""
    who = await ctx.elicit(
        "Name?", {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    )
    return f"Say hello to {who.content['name'] if who.content else 'nobody'}"


@server.resource("mrtr://slow")
async def slow_resource(ctx: Context) -> str:
    """A resource that needs one retry before it is ready."""
    if ctx.retry_state is None:
        ctx.retry_later("warming up")
    return f"ready after {ctx.retry_state}"


@server.tool
async def unsendable_retry(ctx: Context) -> str:
    """Ask to be retried with state that cannot travel in requestState."""
    try:
        ctx.retry_later({"when": object()})
    except TypeError as exc:
        return f"refused: {exc}"
    return "not reached"
