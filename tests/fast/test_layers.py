"""The package's folders are its layers: no import reaches upward, and no two modules import each other.

Read from the code's own import statements (every ``import`` and ``from … import``, at the top of a module
or inside a function, under ``TYPE_CHECKING`` or not), so the layout stays true as the code changes.
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT

PACKAGE = ROOT / "localpager"
# bottom to top: a module may import its own layer and the layers before it
LAYERS = ("core", "backends", "store", "runtime", "retrieval", "memory", "lab", "serving", "cli")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """The localpager modules ``path`` imports, under ``if TYPE_CHECKING:`` too (a ``from x import y`` counts as
    ``x.y`` when that is a module)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            candidates = [f"{target}.{a.name}" for a in node.names] + [target]
        elif isinstance(node, ast.Import):
            candidates = [a.name for a in node.names]
        else:
            continue
        for candidate in candidates:
            if candidate.split(".")[0] == "localpager" and resolves(candidate):
                found.add(candidate)
                break
    return found


def resolves(module: str) -> bool:
    path = PACKAGE.parent.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def layer(module: str) -> str | None:
    """The layer of a module: its folder under localpager, or ``cli``; None for the package itself."""
    parts = module.split(".")
    if len(parts) == 1:
        return None
    return "cli" if parts[1] == "cli" else parts[1]


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


@functools.cache
def graph() -> dict[str, set[str]]:
    """Every module's imports, type-only ones included: parsed when a test first needs them (not at collection,
    which every pytest-xdist worker repeats)."""
    return {name: imports(path) for name, path in MODULES.items()}


def test_every_module_sits_in_a_layer() -> None:
    loose = [m for m in MODULES if m != "localpager" and layer(m) not in LAYERS]
    assert not loose, f"modules outside the layer folders {LAYERS}: {loose}"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m != "localpager"))
def test_no_import_reaches_a_higher_layer(module: str) -> None:
    rank = LAYERS.index(layer(module))
    upward = sorted(t for t in graph()[module] if layer(t) is not None and LAYERS.index(layer(t)) > rank)
    assert not upward, f"{module} ({layer(module)}) imports {upward}"


def test_no_import_circle() -> None:
    """No module reaches itself through its imports (within a layer too), those made only for type checking
    included: a type named back up is a dependency back up all the same."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        stack.append(module)
        for target in sorted(graph().get(module, ())):
            if target not in graph() or target == "localpager":
                continue
            if state.get(target) == 1:
                raise AssertionError("import circle: " + " -> ".join(stack[stack.index(target):] + [target]))
            if target not in state:
                visit(target)
        stack.pop()
        state[module] = 2

    for module in graph():
        if module not in state and module != "localpager":
            visit(module)


def test_the_package_imports_without_fcntl() -> None:
    """Desktop apps on Windows import the library: nothing on its import path may need a POSIX-only module."""
    code = ("import sys; sys.modules['fcntl'] = None\n"
            "import localpager\nfrom localpager import LocalPager, PagingConfig, RecallSettings\n"
            "import localpager.store.locks, localpager.memory.api\nprint('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PACKAGE.parent)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
