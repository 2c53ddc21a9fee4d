"""The host's public surface, pinned, and loaded only when used."""

from __future__ import annotations

import subprocess
import sys

import modelctx
import modelctx.host


def test_host_names():
    assert sorted(modelctx.host.__all__) == sorted(
        [
            "NAME_PATTERN", "AllowAll", "AnthropicModel", "ApprovalCheck", "ApprovalConfigError",
            "ApprovalPolicy", "ApprovalRequest", "ApprovalStore", "ApprovalStoreError", "Approvals", "Asker",
            "Conversation", "DeclineUI", "Decision", "Denied", "Final", "Gateway", "GatewayUI", "GuardedClient", "Host", "HostConfig",
            "HostConfigError", "HostServer", "HostUI", "Model", "ModelError", "ModelLoop", "ModelSetupError",
            "NameFilter", "NameMap", "OpenAIModel", "RemoteServer", "RestartPolicy", "SampleCallback", "ScriptExhausted",
            "ScriptedUI",
            "ServerRules", "ServerSpec", "ServerUnavailable", "TextDelta", "ToolBudget", "ToolCallRequested", "ToolFilter",
            "ToolResultEvent", "ToolSearch", "ToolSet", "UnknownName", "Verdict", "handlers_for", "load_config", "namespaced",
            "serve_gateway", "tool_digest",
        ]
    )
    assert modelctx.Host is modelctx.host.Host


def test_host_errors_are_local_errors_under_the_one_root():
    host = modelctx.host
    errors = (host.HostConfigError, host.ServerUnavailable, host.UnknownName, host.Denied, host.ApprovalConfigError,
              host.ApprovalStoreError, host.ScriptExhausted)
    for cls in errors:
        assert issubclass(cls, modelctx.errors.LocalError), cls


def test_import_modelctx_loads_the_host_only_when_it_is_used():
    code = (
        "import sys, modelctx; assert 'modelctx.host' not in sys.modules; "
        "modelctx.Host; assert 'modelctx.host' in sys.modules; "
        "assert 'modelctx.transports.http_client' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=30)


# -- what the host needs of the client ---------------------------------------------------------------------
def test_a_client_has_a_name_and_typed_capabilities_that_survive_a_malformed_member():
    import asyncio

    from modelctx import Client, Server, ServerConfig

    async def odd_capabilities(call, call_next):
        result = await call_next(call)
        if call.method == "server/discover":
            result["capabilities"]["resources"] = "yes"  # breaks the schema
        return result

    server = Server("odd", config=ServerConfig(middleware=[odd_capabilities]))

    @server.tool
    def ping() -> str:
        return "pong"

    @server.resource("odd://thing")
    def thing() -> str:
        return "thing"

    async def main() -> None:
        async with Client(server, name="odd-one") as named, Client(server) as unnamed:
            assert named.name == "odd-one"
            assert unnamed.name == unnamed.transport.name
            caps = named.server_capabilities
            assert caps.tools and caps.tools.list_changed is True  # typed, not a dict
            assert not caps.resources  # the malformed member is left out...
            assert named.raw_server_capabilities["resources"] == "yes"  # ...and kept raw

    asyncio.run(asyncio.wait_for(main(), 30))
