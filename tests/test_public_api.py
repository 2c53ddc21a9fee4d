"""The public surface, pinned: adding or removing a public name is a decision, not an accident."""

import modelctx
import modelctx.client
import modelctx.errors
import modelctx.protocol
import modelctx.server


def test_top_level_names():
    assert sorted(modelctx.__all__) == sorted(
        [
            "Server", "ServerConfig", "Context", "ElicitResult", "Elicit", "ElicitUrl", "Sample",
            "ListRoots", "CacheHint", "Text", "Image", "Audio", "ResourceLink", "EmbeddedResource",
            "ToolResult", "MCPError", "ProtocolError", "ToolError", "InvalidParams", "ResourceNotFound",
            "RegistrationError", "__version__",
        ]
    )
    for name in modelctx.__all__:
        assert getattr(modelctx, name) is not None


def test_client_names():
    assert sorted(modelctx.client.__all__) == sorted(
        [
            "Client", "ClientSession", "ClientTransport", "Elicitation", "InputRoundsExceeded",
            "ListChanged", "OutputSchemaViolation", "Outgoing", "RequestTimeout", "ResourceUpdated",
            "ResultCache", "SubscriptionEvent", "TransportEvents",
        ]
    )


def test_every_exception_shares_one_root():
    for name in modelctx.errors.__all__:
        obj = getattr(modelctx.errors, name)
        if isinstance(obj, type):
            assert issubclass(obj, modelctx.errors.MCPError), name
    assert issubclass(modelctx.client.RequestTimeout, modelctx.errors.MCPError)
    assert issubclass(modelctx.client.InputRoundsExceeded, modelctx.errors.MCPError)


def test_implementation_modules_are_private():
    for package in (modelctx.protocol, modelctx.server, modelctx.client):
        for name in package.__all__:
            module = getattr(getattr(package, name), "__module__", None) or ""
            if module.startswith("modelctx."):
                assert any(part.startswith("_") for part in module.split(".")[1:]) or module.count(".") == 1, module


def test_importing_modelctx_loads_no_transport_or_http_stack():
    import subprocess
    import sys

    code = (
        "import sys, modelctx; print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('uvicorn', 'httpx', 'starlette', 'asyncio', 'modelctx')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "['modelctx', 'modelctx.errors']", out.stdout + out.stderr
