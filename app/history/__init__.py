"""The SQLite history: conversations and messages, the rows as read back and
checked, the tree of branches, and the search index."""
