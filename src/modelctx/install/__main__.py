"""``python -m modelctx.install``: the same command as ``modelctx install``."""

from ._cli import install_command

install_command(prog_name="modelctx install")
