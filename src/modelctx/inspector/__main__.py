"""``python -m modelctx.inspector inspect|dev ...``: the same commands ``modelctx`` runs."""

import click

from ._cli import dev_command, inspect_command


@click.group()
def main() -> None:
    """The modelctx web inspector."""


main.add_command(inspect_command)
main.add_command(dev_command)

if __name__ == "__main__":
    main()
