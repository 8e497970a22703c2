"""specchat: terminal chat for local llama.cpp models with visible speculative decoding."""

__version__ = "0.1.0"
