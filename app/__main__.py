"""`python -m specchat` runs the CLI."""

from specchat.cli import main

main()
