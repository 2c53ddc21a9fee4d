"""The ``modelctx`` group: a table from command name to where its Click command lives.

Commands load only when they run (Click's lazily loaded subcommands): ``modelctx
--help`` lists every command from the table's short help without importing one, and
``modelctx tools`` imports the client, never the HTTP server or the inspector. Some
commands live in other packages (the inspector, the installer); a command whose
module is missing from this installation fails with one line, not a traceback.
"""

from __future__ import annotations

import importlib
import sys

import click

from ._exit import ExitCode, exit_codes_help

__all__ = ["COMMANDS", "LazyGroup", "cli"]

#: name -> ("module:attribute" of its click.Command, the short help ``--help`` lists).
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("modelctx.cli._serve:serve_command", "Serve a Server from a file or module (stdio or --http)."),
    "dev": ("modelctx.inspector._cli:dev_command", "Serve a server file and inspect it, reloading on change."),
    "inspect": ("modelctx.inspector._cli:inspect_command", "Open the web inspector on a server."),
    "install": ("modelctx.install._cli:install_command", "Add a server to an MCP host's configuration."),
    "discover": ("modelctx.cli._client_commands:discover_command", "Show a server's versions and capabilities."),
    "tools": ("modelctx.cli._client_commands:tools_command", "List a server's tools."),
    "call": ("modelctx.cli._client_commands:call_command", "Call a tool: call TOOL key=value ..."),
    "resources": ("modelctx.cli._client_commands:resources_command", "List resources and resource templates."),
    "read": ("modelctx.cli._client_commands:read_command", "Read a resource: read URI."),
    "prompts": ("modelctx.cli._client_commands:prompts_command", "List a server's prompts."),
    "prompt": ("modelctx.cli._client_commands:prompt_command", "Get a prompt: prompt NAME key=value ..."),
    "complete": ("modelctx.cli._client_commands:complete_command", "Complete a prompt or template argument."),
    "listen": ("modelctx.cli._client_commands:listen_command", "Print list_changed and resource updates."),
    "chat": ("modelctx.cli._host_commands:chat_command", "Chat with a model that uses configured servers."),
    "gateway": ("modelctx.cli._host_commands:gateway_command", "Serve an mcpServers file as one MCP server."),
    "auth-server": ("modelctx.cli._host_commands:auth_server_command", "Run a development OAuth server."),
}


class LazyGroup(click.Group):
    """A group whose commands are imported from ``COMMANDS`` when one is asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module_name, _, attribute = entry[0].partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name is None or not module_name.startswith(exc.name):
                raise  # the module is there; something it imports is not: that is a bug to see
            raise click.UsageError(
                f"'{cmd_name}' is not available in this installation ({module_name} is missing); "
                "install a modelctx release that has it"
            ) from None
        command = getattr(module, attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{entry[0]} is {type(command).__name__}, not a click.Command")
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # The table's short help, so listing the commands imports none of them.
        with formatter.section("Commands"):
            formatter.write_dl([(name, short) for name, (_, short) in COMMANDS.items()])


def _version() -> str:
    from .. import __version__

    return f"modelctx {__version__} (Python {sys.version.split()[0]})"


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(_version())
        ctx.exit(ExitCode.OK)


@click.group(
    "modelctx",
    cls=LazyGroup,
    epilog=exit_codes_help(),
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Print the version and exit.")
def cli() -> None:
    """Model Context Protocol tools: serve a server, talk to one, inspect it.

    Client commands (discover, tools, call, resources, read, prompts, prompt,
    complete, listen) reach a server by --url URL or --stdio "COMMAND LINE";
    --json prints the result object as JSON on stdout and nothing else.
    """
