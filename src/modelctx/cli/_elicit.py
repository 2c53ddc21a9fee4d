"""How a client command answers a server that asks the user something (elicitation).

The choice, kept simple: with ``--accept-elicitation JSON`` every form is accepted with
the values of that object that the form asks for (scripts, tests). Otherwise, when a
person is at a terminal (stdin and stderr are TTYs), each field is asked with a Rich
prompt on stderr (an answer that does not fit the field's schema, a minimum or
a format, is asked again, since the server would refuse the whole form); when not, the form is declined and a line on stderr says how to
answer it. A URL elicitation is shown on stderr and, on a terminal, accepted once the
person says they opened it; else declined.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from ._screen import Screen, for_terminal

__all__ = ["handlers_for"]


def handlers_for(answers: Mapping[str, Any] | None, screen: Screen) -> Any:
    """``ClientHandlers`` whose elicitation handler answers as the module says."""
    from ..client import ClientHandlers, Elicitation

    async def elicit(request: Elicitation) -> dict[str, Any]:
        if request.mode == "url":
            return await _url(request, screen)
        if answers is not None:
            asked = (request.requested_schema or {}).get("properties") or {}
            return {"action": "accept", "content": {k: v for k, v in answers.items() if k in asked}}
        if not (screen.interactive and _rich()):
            screen.note(
                f"the server asked {request.message!r}; declined (no terminal to ask on: "
                "answer with --accept-elicitation JSON)"
            )
            return {"action": "decline"}
        with screen.paused():
            return await asyncio.to_thread(_ask_form, request.message, request.requested_schema or {}, screen)

    return ClientHandlers(elicitation=elicit)


def _rich() -> bool:
    try:
        import rich.prompt  # noqa: F401
    except ImportError:
        return False
    return True


async def _url(request: Any, screen: Screen) -> dict[str, Any]:
    screen.note(f"the server asks you to open {request.url} : {request.message}")
    if not (screen.interactive and _rich()):
        screen.note("declined (no terminal to confirm on)")
        return {"action": "decline"}

    def confirm() -> bool:
        from rich.prompt import Confirm

        return Confirm.ask("Opened it and done?", console=screen.console_for_questions())

    with screen.paused():
        done = await asyncio.to_thread(confirm)
    return {"action": "accept" if done else "decline"}


def _ask_form(message: str, schema: Mapping[str, Any], screen: Screen) -> dict[str, Any]:
    """Ask each field of a flat form schema (client/elicitation.mdx) on the terminal."""
    from rich.prompt import Confirm
    from rich.text import Text

    console = screen.console_for_questions()
    console.print(Text(f"The server asks: {for_terminal(message)}"))
    try:
        if not Confirm.ask("Answer it?", console=console, default=True):
            return {"action": "decline"}
        required = set(schema.get("required") or ())
        content: dict[str, Any] = {}
        for name, field in (schema.get("properties") or {}).items():
            value = _ask_field(name, field if isinstance(field, dict) else {}, name in required, console)
            if value is not None:
                content[name] = value
    except (EOFError, KeyboardInterrupt):
        return {"action": "cancel"}
    return {"action": "accept", "content": content}


def _ask_field(name: str, field: Mapping[str, Any], required: bool, console: Any) -> Any:
    from rich.text import Text

    label = str(field.get("title") or name)
    if field.get("description"):
        label = f"{label} ({field['description']})"
    while True:  # until the answer fits the field's schema: the server would refuse the whole form
        answer = _ask_labelled(Text(for_terminal(label)), field, required, console)
        problem = None if answer is None else _misfit(answer, field)
        if problem is None:
            return answer
        console.print(Text(f"  {for_terminal(problem)}; try again"))


def _misfit(answer: Any, field: Mapping[str, Any]) -> str | None:
    """Why ``answer`` does not fit the field's schema (minimum, pattern, format, ...), or None."""
    import jsonschema  # type: ignore[import-untyped, unused-ignore]  # stubs are optional

    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    try:
        validator = jsonschema.Draft202012Validator(dict(field), format_checker=checker)
        error = jsonschema.exceptions.best_match(validator.iter_errors(answer))
    except (jsonschema.exceptions.SchemaError, TypeError, ValueError):
        return None  # a schema the server got wrong: let the server judge the answer
    return None if error is None else error.message


def _ask_labelled(label: Any, field: Mapping[str, Any], required: bool, console: Any) -> Any:
    """Ask one field; ``label`` is a Rich ``Text``: the server's words are never read as markup."""
    from rich.prompt import Confirm, FloatPrompt, IntPrompt, Prompt

    default = field.get("default")
    kind = field.get("type")
    if kind == "boolean":
        return Confirm.ask(label, console=console, default=bool(default))
    choices = [str(c) for c in field.get("enum") or ()] or None
    prompt: Any = {"integer": IntPrompt, "number": FloatPrompt}.get(kind or "", Prompt)
    if default is None and not required:
        label.append(" (Enter to leave out)")
        answer = prompt.ask(label, console=console, choices=choices, default=None, show_default=False)
        return None if answer in (None, "") else answer
    if default is None:
        return prompt.ask(label, console=console, choices=choices)
    return prompt.ask(label, console=console, choices=choices, default=default)
