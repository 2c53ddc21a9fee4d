"""The terminal chat of ``modelctx chat``: ``run_chat`` a configuration's servers with a
model until the person leaves, or answer one question (``ChatOptions``). Needs ``rich``
(``pip install 'modelctx[host]'``): importing this module without it raises ``ImportError``."""

from __future__ import annotations

from ._chat import ChatOptions, run_chat

__all__ = ["ChatOptions", "run_chat"]
