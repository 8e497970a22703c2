"""Llama.cpp itself: the driver over llama-cpp-python's low-level API, the native preload, the GGUF's chat template, a grammar bound to a vocabulary."""
