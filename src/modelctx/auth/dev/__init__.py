"""The parts of ``DevAuthorizationServer`` (``modelctx.auth._dev_server``)."""
