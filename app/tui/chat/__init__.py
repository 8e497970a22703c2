"""The chat's screen: ChatScreen and what it is drawn with (the log of
messages, their widgets and colours, the stream of rounds, the status bar
and the stats panel, the keys' table, a schema's binding)."""
