"""`python -m duraloop`: the command line."""

from duraloop.cli import main

main()
