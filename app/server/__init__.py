"""A llama.cpp server: the client that reads its answers, its counters, the
session the chat and run drive, and opening one from a command's options."""
