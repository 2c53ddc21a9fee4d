"""The reserved ``_meta`` keys (basic/index.mdx, ``_meta`` table)."""

from __future__ import annotations

__all__ = [
    "PROTOCOL_VERSION",
    "CLIENT_INFO",
    "CLIENT_CAPABILITIES",
    "LOG_LEVEL",
    "SUBSCRIPTION_ID",
    "SERVER_INFO",
    "PROGRESS_TOKEN",
    "RELATED_TASK",
    "RELATED_REQUEST",
    "LOG_LEVELS",
]

PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
LOG_LEVEL = "io.modelcontextprotocol/logLevel"
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"
PROGRESS_TOKEN = "progressToken"
RELATED_TASK = "io.modelcontextprotocol/related-task"
#: modelctx's own key (not the spec's): on a handshake-era server-to-client request, the id
#: of the client request it is asked about, for transports that carry no relation (stdio).
RELATED_REQUEST = "dev.modelctx/related-request"

# RFC 5424 severities in increasing order (server/utilities/logging.mdx).
LOG_LEVELS: dict[str, int] = {
    name: rank
    for rank, name in enumerate(
        ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
    )
}
