"""``python -m modelctx.install``: the same command as ``modelctx install`` (its errors
one line on stderr, its exit statuses the table of ``cli/_exit.py``)."""

import sys

from ..cli import main

main(["install", *sys.argv[1:]])
