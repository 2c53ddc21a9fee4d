"""Pre-fork worker processes (``_workers``): the check the layers above make before they
ask for workers, so that a worker count this machine should not run is refused with its
reason before anything is bound, printed or loaded (``modelctx serve --workers``)."""

from __future__ import annotations

from ._workers import check_workers, max_workers

__all__ = ["check_workers", "max_workers"]
