"""A small server mounted by ``composed_server.py``, and served on its own as the remote
child (``RemoteServer([python, billing_server.py])``)."""

from __future__ import annotations

from modelctx import Context, Server, ToolError

server = Server("billing", version="2.0.0")


@server.tool
async def charge(amount: int, ctx: Context) -> str:
    """Charge an amount.

    Args:
        amount: in cents
    """
    await ctx.report_progress(1, 2, "charging")
    await ctx.info(f"charging {amount}")
    return f"charged {amount} by {ctx.server.name}"


@server.tool
def decline() -> str:
    raise ToolError("card declined")


@server.tool
def open_register(name: str) -> str:
    """Add a tool to this server while it runs (its list_changed must reach the parent)."""

    def opened() -> str:
        return f"register {name}"

    server.add_tool(opened, name=f"register_{name}")
    return "opened"


@server.resource("invoice://{id}")
def invoice(id: str) -> str:
    return f"invoice {id}"


@server.resource("config://billing")
def config() -> str:
    return "currency=EUR"


@server.prompt
def dunning(customer: str) -> str:
    return f"Remind {customer} to pay."


if __name__ == "__main__":
    server.run()
