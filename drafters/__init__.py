"""Drafters: every source of draft tokens, behind one interface (see base.py)."""
