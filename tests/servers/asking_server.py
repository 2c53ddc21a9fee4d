"""A server whose tools ask their caller (elicitation, sampling, roots) and log and report
progress while they run, for the RemoteServer relay tests (tests/test_remote_relays.py)."""

from modelctx import Context, Server

server = Server("asking", version="1.0.0")

SEATS = {"type": "object", "properties": {"seats": {"type": "integer"}}, "required": ["seats"]}


@server.tool
async def book(day: str, ctx: Context) -> str:
    """Book seats on a day, asking how many."""
    await ctx.info(f"booking {day}")
    await ctx.report_progress(1, 2, "asking")
    answer = await ctx.elicit(f"How many seats on {day}?", SEATS)
    if answer.action != "accept":
        return f"not booked: {answer.action}"
    return f"booked {answer.content['seats']} seats on {day}"


@server.tool
async def summarize(text: str, ctx: Context) -> str:
    """A summary by the caller's model."""
    answer = await ctx.sample(f"Summarize: {text}", 50)
    return f"summary: {answer['content']['text']}"


@server.tool
async def where(ctx: Context) -> str:
    """The caller's roots."""
    return " ".join(root["uri"] for root in await ctx.list_roots())


if __name__ == "__main__":
    server.run()
