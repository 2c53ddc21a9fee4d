"""What the tests share, imported one way: ``from tests.support.MODULE import NAME``.

``paths`` names every folder the tests read or run from, ``wire`` speaks raw JSON-RPC to
real server processes (the ``conftest.py`` fixtures are built on it), ``ci_skips`` is the
hook that fails a skipped test under CI, and the other modules start and watch the real
processes a group of tests needs (an authorization server, Redis, nginx, a model API, a
browser, a proxy that cuts connections).
"""
