"""Our echo server whose tool brings its own ``input_schema=`` (the start-up row of issue
25: such a server must start no slower than the TypeScript SDK's)."""

from modelctx import Server

server = Server("bench-echo-schema", "1.0")


@server.tool(
    input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
)
async def echo(text: str) -> str:
    """Echo the text back."""
    return text
