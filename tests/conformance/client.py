"""The conformance client: what the MCP conformance suite runs to test our Client.

    python tests/conformance/client.py URL

The suite sets MCP_CONFORMANCE_SCENARIO (what to do), MCP_CONFORMANCE_PROTOCOL_VERSION
(2026-07-28: stateless; earlier: the initialize handshake) and, for some scenarios,
MCP_CONFORMANCE_CONTEXT (JSON). Each scenario below is written the way an application
would use modelctx.Client; the suite checks what goes over the wire.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from modelctx.client import Client, ClientHandlers, ClientOptions, Elicitation

if TYPE_CHECKING:  # auth scenarios import what they need: the others start faster
    from modelctx.auth import AuthorizationResponse
    from modelctx.transports.http_client import HttpAuth

# The suite's fixed Client ID Metadata Document URL (its basic-cimd scenario expects it).
CIMD_URL = "https://conformance-test.local/client-metadata.json"
REDIRECT_URI = "http://localhost:3000/callback"

Scenario = Callable[[Client], Awaitable[None]]
SCENARIOS: dict[str, Scenario] = {}


def scenario(*names: str) -> Callable[[Scenario], Scenario]:
    def register(fn: Scenario) -> Scenario:
        for name in names:
            SCENARIOS[name] = fn
        return fn

    return register


async def accept_with_defaults(request: Elicitation) -> dict:
    # The client fills in the schema's defaults for fields left out (client/elicitation.mdx).
    return {"action": "accept", "content": {}}


async def confirm(request: Elicitation) -> dict:
    return {"action": "accept", "content": {"confirmed": True}}


@scenario("initialize", "json-schema-ref-no-deref")
async def list_only(client: Client) -> None:
    await client.tools()


@scenario("tools_call")
async def tools_call(client: Client) -> None:
    await client.tools()
    result = await client.call_tool("add_numbers", {"a": 1, "b": 2})
    print(result.content[0].text)


@scenario("elicitation-sep1034-client-defaults")
async def elicitation_defaults(client: Client) -> None:
    await client.tools()
    await client.call_tool("test_client_elicitation_defaults", {})


@scenario("sse-retry")
async def sse_retry(client: Client) -> None:
    await client.tools()
    result = await client.call_tool("test_reconnection", {})
    print(result.content[0].text if result.content else result)


@scenario("request-metadata")
async def request_metadata(client: Client) -> None:
    await client.discover()
    tools = await client.tools()
    if tools:
        await client.call_tool(tools[0].name, {})


@scenario("sep-2322-client-request-state")
async def request_state(client: Client) -> None:
    await client.tools()
    # The unrelated call runs while the echo-state flow is between rounds: state from one
    # flow must never leak into another request.
    await asyncio.gather(
        client.call_tool("test_mrtr_echo_state", {}),
        client.call_tool("test_mrtr_unrelated", {}),
    )
    await client.call_tool("test_mrtr_no_state", {})
    await client.call_tool("test_mrtr_no_result_type", {})


@scenario("http-standard-headers")
async def standard_headers(client: Client) -> None:
    tools = await client.tools()
    for tool in tools:
        await client.call_tool(tool.name, {})
    for resource in await client.resources():
        await client.read_resource(resource.uri)
    for prompt in await client.prompts():
        await client.get_prompt(prompt.name, {})


@scenario("http-custom-headers")
async def custom_headers(client: Client) -> None:
    await client.tools()
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    for call in context.get("toolCalls", []):
        await client.call_tool(call["name"], call.get("arguments") or {})


@scenario("http-invalid-tool-headers")
async def invalid_tool_headers(client: Client) -> None:
    names = [tool.name for tool in await client.tools()]  # invalid tools are dropped here
    if "valid_tool" in names:
        await client.call_tool("valid_tool", {"region": "us-west1"})


@scenario("json-schema-2020-12-preservation")
async def schema_preservation(client: Client) -> None:
    tools = {tool.name: tool for tool in await client.tools()}
    schema = tools["json_schema_2020_12_tool"].input_schema
    await client.call_tool("json_schema_echo", {"schema": schema})


AUTH_SCENARIOS = (
    "auth/metadata-default", "auth/metadata-var1", "auth/metadata-var2", "auth/metadata-var3",
    "auth/basic-cimd", "auth/scope-from-www-authenticate", "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined", "auth/scope-step-up", "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic", "auth/token-endpoint-auth-post", "auth/token-endpoint-auth-none",
    "auth/pre-registration", "auth/resource-mismatch", "auth/offline-access-scope",
    "auth/offline-access-not-supported", "auth/authorization-server-migration", "auth/iss-supported",
    "auth/iss-not-advertised", "auth/iss-supported-missing", "auth/iss-wrong-issuer", "auth/iss-unexpected",
    "auth/iss-normalized", "auth/metadata-issuer-mismatch", "auth/client-credentials-jwt",
    "auth/client-credentials-basic",
)
# Extensions: workload identity federation, enterprise-managed authorization (ID-JAG).
WORKLOAD_SCENARIOS = ("auth/wif-jwt-bearer", "auth/enterprise-managed-authorization")


# The DPoP extension (io.modelcontextprotocol/auth/dpop, RFC 9449): the same flow, tokens
# bound to the provider's key.
DPOP_SCENARIOS = ("auth/dpop", "auth/dpop-nonce")


@scenario(*AUTH_SCENARIOS, *DPOP_SCENARIOS, *WORKLOAD_SCENARIOS)
async def protected_tool(client: Client) -> None:
    # The protected server answers 401 first: the provider authorizes, the call goes through.
    await client.tools()
    await client.call_tool("test-tool", {})


class HeadlessBrowser:
    """The suite's authorization endpoint approves at once and redirects: this "browser"
    follows the authorization URL one step and reads the redirect it is sent to (nothing
    listens at the redirect URI)."""

    def __init__(self) -> None:
        self.location: str | None = None

    async def open(self, url: str) -> None:
        import httpx

        async with httpx.AsyncClient(follow_redirects=False, timeout=10.0) as http:
            response = await http.get(url)
        self.location = response.headers.get("location")
        if not self.location:
            raise RuntimeError(f"the authorization endpoint answered {response.status_code} with no redirect")

    async def callback(self) -> AuthorizationResponse:
        from modelctx.auth import AuthorizationResponse

        assert self.location is not None
        return AuthorizationResponse.from_url(self.location)


def auth_for(name: str, context: dict) -> HttpAuth | None:
    """The auth object the scenario calls for, configured as an application would."""
    if not name.startswith("auth/"):
        return None
    from modelctx.auth import ClientCredentialsProvider, ClientMetadata, OAuthClientProvider

    if name == "auth/client-credentials-jwt":
        return ClientCredentialsProvider(
            context["client_id"],
            private_key=context["private_key_pem"],
            signing_algorithm=context.get("signing_algorithm", "ES256"),
        )
    if name == "auth/wif-jwt-bearer":
        from modelctx.auth import WorkloadIdentityProvider

        return WorkloadIdentityProvider(context["valid_jwt"], client_id=context["client_id"])
    if name == "auth/enterprise-managed-authorization":
        from modelctx.auth import EnterpriseAuthorizationProvider

        return EnterpriseAuthorizationProvider(
            context["client_id"],
            client_secret=context["client_secret"],
            id_token=context["idp_id_token"],
            idp_issuer=context["idp_issuer"],
            idp_client_id=context["idp_client_id"],
        )
    if name == "auth/client-credentials-basic":
        return ClientCredentialsProvider(context["client_id"], client_secret=context["client_secret"])
    browser = HeadlessBrowser()
    return OAuthClientProvider(
        ClientMetadata(client_name="modelctx-conformance-client", redirect_uris=(REDIRECT_URI,)),
        client_id=context.get("client_id"),
        client_secret=context.get("client_secret"),
        client_id_metadata_url=CIMD_URL,
        redirect_handler=browser.open,
        callback_handler=browser.callback,
        dpop=name in DPOP_SCENARIOS,
    )


async def main(url: str) -> int:
    name = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION", "2026-07-28")
    run = SCENARIOS.get(name)
    if run is None:
        print(f"unknown scenario {name!r}; known: {', '.join(sorted(SCENARIOS))}", file=sys.stderr)
        return 2
    elicitation = confirm if name == "sep-2322-client-request-state" else accept_with_defaults
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    async with Client(
        url,
        mode="auto" if version == "2026-07-28" else "handshake",
        timeout=20.0,
        handlers=ClientHandlers(elicitation=elicitation),
        options=ClientOptions(client_info={"name": "modelctx-conformance-client", "version": "0.1.0"}),
        auth=auth_for(name, context),
    ) as client:
        await run(client)
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    sys.exit(asyncio.run(main(sys.argv[1])))
