"""Helpers shared by tests in both folders (``tests/fast`` and ``tests/model``): paths, data and small builders.

Imported as ``from helpers import ...`` (``tests/conftest.py`` puts ``tests/`` on ``sys.path``); nothing here
loads a model."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent  # tests/: fakes.py, faultkit.py, helpers.py
ROOT = TESTS.parent  # the repository
LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo10.json"
needs_locomo = pytest.mark.skipif(not LOCOMO.exists(), reason="LoCoMo data not beside the repository")


def benchmark_module(name: str):
    """``benchmarks/<name>.py`` imported as a module (the benchmarks are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
