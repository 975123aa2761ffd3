"""A sentence-transformers BERT encoder (all-MiniLM-L6-v2 and its kin) run in numpy, without torch.

Importing torch and sentence-transformers costs 3-20 s on a laptop CPU: every one-shot ``ask`` and every
app start paid it before its first answer. A 6-layer, 384-wide BERT is a dozen matrix products, so the
same model directory is run here from its safetensors weights and its ``tokenizer.json`` (the Rust
``tokenizers`` package, which sentence-transformers uses too), in about a tenth of a second from a cold
process. It is used only for the directories it reproduces exactly (``supports``): a BERT encoder with
mean pooling and L2 normalisation; any other model goes through sentence-transformers. The vectors agree
with sentence-transformers' to float32 rounding (tested), so indexes built by either are interchangeable.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

TRANSFORMER = "sentence_transformers.models.Transformer"
POOLING = "sentence_transformers.models.Pooling"
NORMALIZE = "sentence_transformers.models.Normalize"


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def supports(path: Path) -> bool:
    """Whether ``path`` is a sentence-transformers directory this encoder reproduces: modules
    Transformer → Pooling (mean) → Normalize, a BERT with GELU and absolute positions, safetensors weights
    and a fast-tokenizer file."""
    modules = _read(path / "modules.json")
    kinds = [m.get("type") for m in modules] if isinstance(modules, list) else []
    if kinds not in ([TRANSFORMER, POOLING, NORMALIZE],) or modules[0].get("path", "") != "":
        return False
    pooling = _read(path / modules[1].get("path", "1_Pooling") / "config.json")
    modes = {k for k, v in pooling.items() if k.startswith("pooling_mode") and v}
    config = _read(path / "config.json")
    return (modes == {"pooling_mode_mean_tokens"} and config.get("model_type") == "bert"
            and config.get("hidden_act") == "gelu"
            and config.get("position_embedding_type", "absolute") == "absolute"
            and (path / "model.safetensors").is_file() and (path / "tokenizer.json").is_file())


def _erf(x: np.ndarray) -> np.ndarray:
    """erf to about 1e-7 (Abramowitz & Stegun 7.1.26), for BERT's exact GELU without scipy; computed in
    place on two buffers, since over a batch of turns this is as costly as the matrix products."""
    a = np.abs(x)
    t = a * np.float32(0.3275911)
    t += 1
    np.reciprocal(t, out=t)
    y = t * np.float32(1.061405429)
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        y += np.float32(c)
        y *= t
    np.multiply(a, a, out=a)
    np.negative(a, out=a)
    np.exp(a, out=a)
    y *= a
    np.subtract(1, y, out=y)
    return np.copysign(y, x, out=y)


def _gelu(x: np.ndarray) -> np.ndarray:
    """0.5·x·(1 + erf(x/√2)), overwriting nothing the caller keeps."""
    y = _erf(x * np.float32(1 / np.sqrt(2.0)))
    y += 1
    y *= x
    y *= np.float32(0.5)
    return y


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


class NumpyBertEncoder:
    """Mean-pooled, normalised BERT sentence embeddings in float32 numpy."""

    def __init__(self, path: str | Path):
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        path = Path(path)
        config = _read(path / "config.json")
        self.dim = int(config["hidden_size"])
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.max_length = int(_read(path / "sentence_bert_config.json").get("max_seq_length")
                              or config.get("max_position_embeddings", 512))
        self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=self.max_length)
        weights = load_file(str(path / "model.safetensors"))
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in weights else ""
        self.w = {k[len(prefix):]: v.astype(np.float32, copy=False) for k, v in weights.items()
                  if k.startswith(prefix)}

    def _layer(self, x: np.ndarray, bias: np.ndarray, i: int, batch: int, length: int) -> np.ndarray:
        """One encoder layer on ``x`` of shape (batch * length, dim); products are 2-D or contiguous
        stacks so that numpy hands every one of them to BLAS."""
        w = self.w
        p = f"encoder.layer.{i}."
        dim = x.shape[1]
        d = dim // self.heads

        def proj(name: str) -> np.ndarray:
            y = x @ w[p + f"attention.self.{name}.weight"].T + w[p + f"attention.self.{name}.bias"]
            return np.ascontiguousarray(y.reshape(batch, length, self.heads, d).transpose(0, 2, 1, 3))

        q, k, v = proj("query"), proj("key"), proj("value")
        scores = q @ np.ascontiguousarray(k.transpose(0, 1, 3, 2)) / np.float32(np.sqrt(d)) + bias
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        scores /= scores.sum(-1, keepdims=True)
        context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch * length, dim)
        attended = context @ w[p + "attention.output.dense.weight"].T + w[p + "attention.output.dense.bias"]
        x = _layer_norm(x + attended, w[p + "attention.output.LayerNorm.weight"],
                        w[p + "attention.output.LayerNorm.bias"], self.eps)
        inner = _gelu(x @ w[p + "intermediate.dense.weight"].T + w[p + "intermediate.dense.bias"])
        out = inner @ w[p + "output.dense.weight"].T + w[p + "output.dense.bias"]
        return _layer_norm(x + out, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], self.eps)

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        w = self.w
        batch, length = ids.shape
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:length]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
        x = x.reshape(batch * length, -1)
        bias = ((1.0 - mask[:, None, None, :]) * np.finfo(np.float32).min).astype(np.float32)
        for i in range(self.layers):
            x = self._layer(x, bias, i, batch, length)
        x = x.reshape(batch, length, -1)
        summed = (x * mask[:, :, None]).sum(1)
        pooled = summed / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

    def encode(self, texts: list[str], batch_size: int = 16) -> np.ndarray:
        """One L2-normalised row per text; texts are batched by length so padding stays small."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        encodings = self.tokenizer.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            length = max(len(encodings[i].ids) for i in rows)
            ids = np.zeros((len(rows), length), dtype=np.int64)
            mask = np.zeros((len(rows), length), dtype=np.float32)
            for r, i in enumerate(rows):
                n = len(encodings[i].ids)
                ids[r, :n] = encodings[i].ids
                mask[r, :n] = 1.0
            out[rows] = self._forward(ids, mask)
        return out
