"""A conversation on a loaded pair: opening the pair, the ChatSession that
the chat, `run` and `bench` drive, its messages and turns, and the stored
replies' tokens kept between runs."""
