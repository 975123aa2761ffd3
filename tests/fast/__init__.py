"""Tests that need neither the real model nor the real embedder (the fakes of ``tests/fakes.py``): ``make test-fast``.

A test here may not be marked ``model`` or ``embedder``; ``tests/conftest.py`` fails it if it is."""
