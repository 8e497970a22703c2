"""`python -m specchat` runs the CLI."""

from specchat.cli.main import main

main()
