"""Finding the models on disk: an explicit path, an environment variable, or the manifest default."""

from __future__ import annotations

import importlib.metadata
import importlib.resources
import os
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

GGUF_MAGIC = b"GGUF"


class ModelNotFoundError(RuntimeError):
    """A model that is missing or unusable; the message is one line and names the path."""


@cache
def manifest() -> dict[str, Any]:
    text = importlib.resources.files("localpager.manifest").joinpath("manifest.toml").read_text()
    return tomllib.loads(text)


def _package_file(package: str, match) -> Path:
    try:
        files = importlib.metadata.files(package) or []
    except importlib.metadata.PackageNotFoundError:
        raise ModelNotFoundError(
            f"the default model package {package!r} is not installed; run `make setup` or pass a path"
        ) from None
    for f in files:
        if match(f):
            return Path(f.locate())
    raise ModelNotFoundError(f"package {package!r} holds no model file")


def chat_model_path(path: str | os.PathLike | None = None) -> Path:
    """The GGUF file to load: ``path``, else ``$LOCALPAGER_MODEL``, else the manifest default."""
    spec = manifest()["chat"]
    chosen = path or os.environ.get(spec["env"])
    if chosen:
        return check_gguf(Path(chosen).expanduser())
    return check_gguf(_package_file(spec["package"], lambda f: f.suffix == spec["file_suffix"]))


def check_gguf(path: Path) -> Path:
    """``path`` if it is a readable GGUF file; otherwise a one-line ModelNotFoundError."""
    if not path.exists():
        raise ModelNotFoundError(f"model file not found: {path}")
    if not path.is_file():
        raise ModelNotFoundError(f"model path is not a file: {path}")
    try:
        with path.open("rb") as fh:
            magic = fh.read(4)
    except OSError as exc:
        raise ModelNotFoundError(f"cannot read model file {path}: {exc.strerror}") from None
    if magic != GGUF_MAGIC:
        raise ModelNotFoundError(f"not a GGUF model file: {path}")
    return path


def embedder_path(path: str | os.PathLike | None = None) -> Path:
    """The sentence-transformers directory: ``path``, else ``$LOCALPAGER_EMBEDDER``, else the default."""
    return _model_directory("embedder", path, "modules.json", "config.json", "a sentence-transformers model")


def default_embedder_path() -> Path:
    """The default embedder's directory (the manifest's package), whatever ``$LOCALPAGER_EMBEDDER`` says: what
    models fitted on its word vectors read (``word_vectors``)."""
    spec = manifest()["embedder"]
    return _package_file(spec["package"], lambda f: str(f) == f"{spec['directory']}/modules.json").parent


def parser_path(path: str | os.PathLike | None = None) -> Path:
    """The spaCy pipeline directory: ``path``, else ``$LOCALPAGER_PARSER``, else the manifest default."""
    return _model_directory("parser", path, "config.cfg", "config.cfg", "a spaCy pipeline")


def _model_directory(role: str, path: str | os.PathLike | None, marker: str, needed: str, what: str) -> Path:
    """Role ``role``'s model directory: ``path``, else its environment variable, else the manifest's directory in
    its package (found by its file ``marker``); one that lacks the file ``needed`` is a one-line error."""
    spec = manifest()[role]
    chosen = path or os.environ.get(spec["env"])
    if chosen:
        directory = Path(chosen).expanduser()
    else:
        directory = _package_file(spec["package"], lambda f: str(f) == f"{spec['directory']}/{marker}").parent
    if not directory.is_dir() or not (directory / needed).exists():
        raise ModelNotFoundError(f"not {what} directory: {directory}")
    return directory
