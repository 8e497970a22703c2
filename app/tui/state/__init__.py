"""The chat's state, without Textual: its rules (controller.py), its
conversation and what it drives (models.py: a local pair or a server)."""
