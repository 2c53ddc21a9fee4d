"""The host's public surface, pinned, and loaded only when used."""

from __future__ import annotations

import subprocess
import sys

import modelctx
import modelctx.host


def test_host_names():
    assert sorted(modelctx.host.__all__) == sorted(
        [
            "NAME_PATTERN", "AllowAll", "ApprovalCheck", "DenyAllUI", "Host", "HostConfig",
            "HostConfigError", "HostServer", "HostUI", "NameMap", "RestartPolicy", "SampleCallback", "ServerSpec",
            "ServerUnavailable", "ToolFilter", "UnknownName", "load_config", "namespaced",
        ]
    )
    assert modelctx.Host is modelctx.host.Host


def test_host_errors_are_local_errors_under_the_one_root():
    for cls in (modelctx.host.HostConfigError, modelctx.host.ServerUnavailable, modelctx.host.UnknownName):
        assert issubclass(cls, modelctx.errors.LocalError), cls


def test_import_modelctx_loads_the_host_only_when_it_is_used():
    code = (
        "import sys, modelctx; assert 'modelctx.host' not in sys.modules; "
        "modelctx.Host; assert 'modelctx.host' in sys.modules; "
        "assert 'modelctx.transports.http_client' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=30)
