"""FastMCP's echo server (PyPI ``fastmcp``, pinned in scripts/test.sh in .tools/fastmcp):
``python fastmcp_echo.py`` serves it on stdio. The same plain ``def`` tool as the others."""

from fastmcp import FastMCP

mcp = FastMCP("bench-echo-fastmcp")


@mcp.tool
def echo(text: str) -> str:
    """Echo the text back."""
    return text


if __name__ == "__main__":
    mcp.run(show_banner=False)
