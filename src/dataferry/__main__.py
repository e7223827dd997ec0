"""`python -m dataferry`: the `dataferry` command, as the installed script runs it."""

from .cli import main

main()
