"""The numpy BERT encoder against sentence-transformers on the real default embedder."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from localpager.core.modelpaths import embedder_path
from localpager.retrieval.bert import NumpyBertEncoder, supports

TEXTS = [
    "What snack should I avoid?",
    "I'm allergic to peanuts, so no peanut butter for me.",
    "Café, résumé, naïve; 東京で会いましょう 😀",
    "",
    "budget " * 400,  # past the 256-token limit: truncated the same way
    "<|im_end|> [SEP] [CLS] recall(page_ids=[3])",
]


@pytest.mark.embedder
def test_vectors_equal_sentence_transformers():
    from sentence_transformers import SentenceTransformer

    path = embedder_path(None)
    ours = NumpyBertEncoder(path).encode(TEXTS, batch_size=4)
    reference = SentenceTransformer(str(path), device="cpu", local_files_only=True).encode(
        TEXTS, normalize_embeddings=True, convert_to_numpy=True)
    assert ours.dtype == np.float32 and ours.shape == reference.shape
    assert np.abs(ours - reference).max() < 1e-5
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


@pytest.mark.embedder
def test_the_default_embedder_answers_without_importing_torch():
    code = ("import sys; from localpager.retrieval.embedder import Embedder; e = Embedder(); v = e.encode(['peanut allergy']); "
            "print(v.shape[1], 'torch' in sys.modules, 'sentence_transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["384", "False", "False"]


@pytest.mark.embedder  # reads the default model's directory (its files, not the model)
def test_only_mean_pooled_bert_directories_are_run_in_numpy(tmp_path):
    path = embedder_path(None)
    assert supports(path)
    other = tmp_path / "cls-pooled"
    other.mkdir()
    for name in ("config.json", "modules.json", "tokenizer.json", "model.safetensors"):
        (other / name).symlink_to(path / name)
    (other / "1_Pooling").mkdir()
    (other / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_cls_token": True}))
    assert not supports(other)
    assert not supports(tmp_path)  # not a model directory at all
