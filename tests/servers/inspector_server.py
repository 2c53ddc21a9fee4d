"""A server for the inspector's browser tests: a nested schema with an enum and a default,
an image result, progress, an elicitation, an error, and a tool that changes the tool list."""

import base64
from dataclasses import dataclass
from typing import Literal

from modelctx import Context, ResourceNotFound, Server, ToolError
from modelctx.server import Audio, EmbeddedResource, Image, ResourceLink, ToolResult

server = Server("inspector-test", version="2.0.0", instructions="A server to look at.")

# A 1x1 red PNG.
_PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)


@dataclass
class Destination:
    city: str
    nights: int


@server.tool
def book_trip(destination: Destination, cabin: Literal["economy", "business"] = "economy", seats: int = 1) -> str:
    """Book a trip (a nested object, an enum with a default, an integer).

    Args:
        destination: where to and for how long
        cabin: the cabin class
        seats: how many seats
    """
    return f"booked {seats} {cabin} seat(s) to {destination.city} for {destination.nights} nights"


@server.tool
def picture() -> Image:
    """A one-pixel red picture."""
    return Image(_PIXEL, "image/png")


# The smallest WAV file: a RIFF header and no samples.
_SILENCE = b"RIFF$\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00@\x1f\x00\x00@\x1f\x00\x00\x01\x00\x08\x00data\x00\x00\x00\x00"


@server.tool
def media() -> ToolResult:
    """Audio, a resource link and an embedded resource, in one result."""
    return ToolResult(
        [
            Audio(_SILENCE, "audio/wav"),
            ResourceLink("inspector://readme", "readme", mime_type="text/plain"),
            EmbeddedResource("inspector://note", text="an embedded note", mime_type="text/plain"),
        ]
    )


@dataclass
class Quote:
    city: str
    price: float


@server.tool
def quote(city: str, extras: list[str] | None = None) -> Quote:
    """A price, as structured content; each extra (an array) costs 10 more."""
    return Quote(city, 99.5 + 10 * len(extras or []))


@server.tool
async def sign_in(ctx: Context, url: str = "https://example.com/sign-in") -> str:
    """Send the user to a page (URL-mode elicitation)."""
    answer = await ctx.elicit_url("Sign in to continue", url)
    return f"sign-in {answer.action}ed" if answer.action == "accept" else f"sign-in {answer.action}d"


@server.tool
async def count(to: int, ctx: Context) -> str:
    """Count to a number, reporting progress at each step."""
    for step in range(1, to + 1):
        await ctx.report_progress(step, to, f"step {step}")
    return f"counted to {to}"


@dataclass
class Confirmation:
    confirm: bool
    seat: Literal["window", "aisle"] = "aisle"


@server.tool
async def confirm_booking(ctx: Context) -> str:
    """Ask the user to confirm, with a seat choice (elicitation)."""
    answer = await ctx.elicit("Confirm the booking?", Confirmation)
    if answer.action != "accept" or answer.content is None:
        return f"booking {answer.action}d"
    return f"confirmed={answer.content.confirm} seat={answer.content.seat}"


@server.tool
def fail() -> str:
    """Always fails as a tool error (isError)."""
    raise ToolError("the tool failed on purpose")


@server.tool
def add_tool(name: str) -> str:
    """Register a new tool named NAME: the server says its tool list changed."""

    def added() -> str:
        return f"I am {name}"

    server.add_tool(added, name=name, description=f"added at run time as {name}")
    return f"added {name}"


@server.resource("inspector://readme", mime_type="text/plain")
def readme() -> str:
    """What this server is."""
    return "A server for the inspector's tests."


@server.resource("inspector://greeting/{who}")
def greeting(who: str) -> str:
    """A greeting for someone (nobody is not found: a JSON-RPC error)."""
    if who == "nobody":
        raise ResourceNotFound(f"inspector://greeting/{who}")
    return f"hello, {who}"


@server.prompt
def review(topic: str) -> str:
    """Ask for a review of a topic."""
    return f"Please review {topic}."
