"""specchat: terminal chat for local llama.cpp models with visible speculative decoding."""

from specchat.llamacpp.native import preload

__version__ = "0.1.0"

preload()  # llama.cpp's libraries before numpy's libstdc++: see native.py
