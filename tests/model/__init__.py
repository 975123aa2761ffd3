"""Tests that run the real SmolLM2 GGUF (its chat model or its tokenizer) or the real all-MiniLM-L6-v2 embedder.

Every test here is marked ``model`` or ``embedder`` (``tests/conftest.py`` fails one that is neither). A real-model
test asserts only what holds on every CPU and build: greedy output differs between machines, so a test that needs
a particular output forces it (a constraint) or checks structure, traces and properties."""
