"""`python -m dataferry.cli`: the `dataferry` command."""

from . import main

main()
