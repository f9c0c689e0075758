"""Models: the Llama-family transformer, presets, and loading from folders."""
