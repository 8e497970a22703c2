"""Llama.cpp itself: the driver over llama-cpp-python's low-level API, the
native preload, the GGUF's chat template, a grammar bound to a vocabulary,
a target's MTP head, the CPU kernels it may load and where a model runs.
It reads no settings: its callers hand it every choice as a value."""
