"""llama-cpp-python's internals live in one module, behind one version check (issue 23, item 6).

The check is read from the code's own syntax (every module of the package but ``backends/llama_internals.py``):
no llama.cpp C function (``llama_cpp.llama_*``), no private module of llama-cpp-python (``llama_cpp.llama_cpp``,
``llama_cpp._utils``), no private attribute of its ``Llama`` (``_ctx``, ``_batch``, ``_input_ids``, … read from
the installed ``Llama``'s source) and none of its token bookkeeping (``input_ids``, ``n_tokens``). The version
check is run with the installed version replaced (nothing is loaded)."""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT

from localpager.backends.base import BackendError

PACKAGE = ROOT / "localpager"
INTERNALS = PACKAGE / "backends" / "llama_internals.py"
BOOKKEEPING = {"input_ids", "n_tokens"}
MESSAGE = ("localpager needs llama-cpp-python ~=0.3.36 (0.3.36 up to 0.4); found {}: "
           "pip install 'llama-cpp-python~=0.3.36'")


def llama_private_attributes() -> set[str]:
    """The private attributes and methods of the installed ``llama_cpp.Llama``, from its source."""
    spec = importlib.util.find_spec("llama_cpp")
    source = Path(next(iter(spec.submodule_search_locations))) / "llama.py"
    tree = ast.parse(source.read_text(encoding="utf-8"))
    llama = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Llama")
    names = set()
    for node in ast.walk(llama):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"
                and isinstance(node.ctx, ast.Store)):
            names.add(node.attr)
        elif isinstance(node, ast.FunctionDef):
            names.add(node.name)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def own_attributes(tree: ast.AST) -> set[str]:
    """Attributes a module's own classes define (methods, ``self.x = …``): ``self._batch()`` of the assistant
    is its own method, not ``Llama``'s batch."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in ast.walk(node):
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(item.name)
                elif (isinstance(item, ast.Attribute) and isinstance(item.value, ast.Name) and item.value.id == "self"
                      and isinstance(item.ctx, ast.Store)):
                    names.add(item.attr)
    return names


def internal_uses(path: Path, private: set[str]) -> list[str]:
    """Where ``path`` reaches into llama-cpp-python beyond its public API, as ``line: what``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    own = own_attributes(tree)
    found = []

    def private_name(name: str) -> bool:
        return name.startswith("llama_") or (name.startswith("_") and not name.startswith("__"))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names
                      if a.name.startswith("llama_cpp.") and private_name(a.name.split(".")[1])]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "llama_cpp":
            if node.module != "llama_cpp" and private_name(node.module.split(".")[1]):
                found.append(f"{node.lineno}: from {node.module} import …")
            elif node.module == "llama_cpp":
                found += [f"{node.lineno}: from llama_cpp import {a.name}" for a in node.names if private_name(a.name)]
        elif isinstance(node, ast.Attribute):
            base = node.value
            if isinstance(base, ast.Name) and base.id == "llama_cpp" and private_name(node.attr):
                found.append(f"{node.lineno}: llama_cpp.{node.attr}")
            elif node.attr in BOOKKEEPING:
                found.append(f"{node.lineno}: .{node.attr}")
            elif node.attr in private and not (isinstance(base, ast.Name) and base.id == "self" and node.attr in own):
                found.append(f"{node.lineno}: .{node.attr}")
    return found


def test_no_module_but_llama_internals_touches_llama_cpp_python_internals():
    private = llama_private_attributes()
    assert {"_ctx", "_batch", "_input_ids", "_requires_eval"} <= private  # the reader sees what it should
    offenders = {str(p.relative_to(PACKAGE.parent)): uses for p in sorted(PACKAGE.rglob("*.py"))
                 if p != INTERNALS and (uses := internal_uses(p, private))}
    assert not offenders, f"llama-cpp-python internals outside backends/llama_internals.py: {offenders}"


def test_the_reader_finds_every_kind_of_reach(tmp_path):
    """The check is not vacuous: each kind of reach it forbids is found in a module written to have it."""
    module = tmp_path / "reach.py"
    module.write_text(
        "import llama_cpp\nimport llama_cpp.llama_cpp as raw\nfrom llama_cpp._utils import suppress_stdout_stderr\n"
        "from llama_cpp import llama_memory_clear, Llama, LlamaGrammar\n"
        "class Backend:\n"
        "    def _batch(self):\n        return self._batch\n"
        "    def go(self, llm):\n"
        "        llama_cpp.llama_get_memory(llm._ctx.ctx)\n"
        "        llm.n_tokens = 0\n        llm.input_ids[:1] = [1]\n        self._llm._batch.set_batch()\n"
        "        return llama_cpp.__version__, llama_cpp.Llama\n")
    uses = internal_uses(module, llama_private_attributes())
    assert sorted(uses) == sorted([
        "2: import llama_cpp.llama_cpp", "3: from llama_cpp._utils import …",
        "4: from llama_cpp import llama_memory_clear", "9: llama_cpp.llama_get_memory", "9: ._ctx", "10: .n_tokens",
        "11: .input_ids", "12: ._batch"]), uses


@pytest.mark.parametrize("version", ["0.3.36", "0.3.37", "0.3.99", "0.3.36.post1", "0.3.40rc1"])
def test_the_supported_range_passes(version):
    from localpager.backends.llama_internals import check_version

    check_version(version)


@pytest.mark.parametrize("version", ["0.3.35", "0.3.8", "0.4.0", "0.4", "1.0.0", "0.2.90", None, "garbage"])
def test_anything_else_is_one_line_naming_the_range(version):
    from localpager.backends.llama_internals import check_version

    with pytest.raises(BackendError) as info:
        check_version(version)
    assert str(info.value) == MESSAGE.format(version or "none")


def test_importing_the_internals_checks_the_installed_version(monkeypatch):
    """The check runs when the module is imported, before llama_cpp is: with another version installed the
    import fails with the one line."""
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.3.20")
    monkeypatch.delitem(sys.modules, "localpager.backends.llama_internals", raising=False)
    with pytest.raises(BackendError) as info:
        importlib.import_module("localpager.backends.llama_internals")
    assert str(info.value) == MESSAGE.format("0.3.20")
    monkeypatch.delitem(sys.modules, "localpager.backends.llama_internals", raising=False)


def test_loading_a_model_with_another_version_fails_with_that_line_alone(tmp_path):
    """Through the backend's loader the line comes out as it is (not as "cannot load model …"), before any
    model file is read; in a process of its own, so nothing is loaded here."""
    model = tmp_path / "model.gguf"
    model.write_bytes(b"not a model")
    code = ("import importlib.metadata as m; m.version = lambda name: '0.4.1'\n"
            "from pathlib import Path\nfrom localpager.backends.llama import load_llama\n"
            "from localpager.backends.base import BackendError\n"
            f"try:\n    load_llama(Path({str(model)!r}))\nexcept BackendError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PACKAGE.parent)
    assert out.stdout.strip() == MESSAGE.format("0.4.1"), out.stderr
    assert "llama_cpp" not in out.stderr
