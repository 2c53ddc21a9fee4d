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
            "ToolResult", "ArgTransform", "Client", "ClientHandlers", "ClientOptions", "Host", "MCPError", "ProtocolError",
            "ToolError", "ResourceNotFound", "InvalidParams", "RegistrationError", "__version__",
        ]
    )
    for name in modelctx.__all__:
        assert getattr(modelctx, name) is not None


def test_client_names():
    assert sorted(modelctx.client.__all__) == sorted(
        [
            "Client", "ClientHandlers", "ClientOptions", "ClientSession", "ClientTransport",
            "Elicitation", "InputRoundsExceeded", "ListChanged", "OutputSchemaViolation", "Outgoing",
            "ProgressCallback", "RequestTimeout", "ResourceUpdated", "ResultCache", "SubscriptionEvent", "Target",
            "TaskCancelled", "TaskHandle", "TransportEvents", "UrlPolicy", "UrlRefused", "fetch_json",
        ]
    )


def test_every_exception_shares_one_root():
    for name in modelctx.errors.__all__:
        obj = getattr(modelctx.errors, name)
        if isinstance(obj, type):
            assert issubclass(obj, modelctx.errors.MCPError), name
    assert issubclass(modelctx.client.RequestTimeout, modelctx.errors.MCPError)
    assert issubclass(modelctx.client.InputRoundsExceeded, modelctx.errors.MCPError)


def test_errors_found_on_this_side_are_local_errors_with_no_json_rpc_code():
    errors = modelctx.errors
    local = (
        errors.ConnectionClosed, errors.SessionExpired, errors.HttpStatusError, errors.RequestTimeout,
        errors.MalformedResponse, errors.InputRoundsExceeded, errors.OutputSchemaViolation,
        errors.UrlRefused,
    )
    for cls in local:
        assert issubclass(cls, errors.LocalError), cls
        assert not issubclass(cls, errors.ProtocolError), cls
        assert not hasattr(cls, "code"), cls
    assert issubclass(errors.RequestTimeout, TimeoutError)  # `except TimeoutError` still works
    # One class, re-exported where it always was.
    assert modelctx.client.RequestTimeout is errors.RequestTimeout
    assert modelctx.client.InputRoundsExceeded is errors.InputRoundsExceeded
    assert modelctx.client.OutputSchemaViolation is errors.OutputSchemaViolation
    from modelctx.client._session import RequestTimeout as raised_by_the_session

    assert raised_by_the_session is errors.RequestTimeout


def test_the_client_is_importable_from_the_top_level_lazily():
    import subprocess
    import sys

    code = (
        "import sys, modelctx; before = 'modelctx.client' in sys.modules; "
        "from modelctx import Client; import modelctx.client as c; "
        "print(before, Client is c.Client)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["False", "True"], out.stdout + out.stderr


def test_the_package_ships_py_typed_for_type_checkers():
    from importlib.resources import files

    assert files("modelctx").joinpath("py.typed").is_file()


# The public modules that are seams between packages (ARCHITECTURE.md): the layers above import
# them by name, so a package's exported names may be defined there; every other module a package's
# names come from is private.
SEAM_MODULES = {
    f"modelctx.{name}"
    for name in (
        "protocol.apps", "protocol.connection", "protocol.framing", "protocol.headers", "protocol.jsonrpc",
        "protocol.meta", "protocol.versions", "transports.auth_seam", "transports.client_seam",
        "transports.fetch", "transports.identity", "transports.server_seam", "transports.session",
        "transports.workers", "server.definitions", "server.dispatch", "server.redis",
    )
}


def test_implementation_modules_are_private():
    for package in (modelctx.protocol, modelctx.server, modelctx.client):
        for name in package.__all__:
            module = getattr(getattr(package, name), "__module__", None) or ""
            if module.startswith("modelctx.") and module not in SEAM_MODULES:
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
