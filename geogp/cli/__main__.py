"""``python -m geogp.cli``: the ``geogp`` command."""

from geogp.cli import command

command()
