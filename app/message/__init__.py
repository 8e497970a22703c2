"""What a user's message holds and does: attached files, a reply written
back to one (with its diff), the slash commands, and a schema or grammar the
reply must match."""
