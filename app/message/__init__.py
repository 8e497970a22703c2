"""What a user's message holds and does: attached files, a reply written
back to one (with its diff), and the slash commands."""
