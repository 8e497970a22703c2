"""Specchat bench: the suites, what it measures besides runs, the scorecard's arithmetic and table."""
