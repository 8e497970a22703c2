"""Model files: the catalog, the store on disk, pull (Hub and PyPI mirror), what is pulled, llama.cpp's pairing rule."""
