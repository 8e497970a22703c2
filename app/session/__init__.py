"""A conversation on a loaded pair: what it is opened with (LoadOptions and
DecodeOptions, resolved once from a command's flags, the environment and the
settings), opening the pair, the ChatSession that the chat, `run` and
`bench` drive, its messages and turns, and the stored replies' tokens kept
between runs."""
