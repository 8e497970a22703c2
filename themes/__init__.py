"""Textual themes, each carrying the speculation colours as theme variables."""
