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


# erf(z) = 1 - t·(a1 + t·(a2 + …))·exp(-z²), t = 1 / (1 + p·z), for z ≥ 0, to about 1e-7 (Abramowitz & Stegun 7.1.26)
_P = 0.3275911
_A = (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592)
_TP = np.float32(_P / np.sqrt(2.0))
_AS = tuple(np.float32(a) for a in _A)


def _gelu(x: np.ndarray, bias: np.ndarray | None = None, scratch: np.ndarray | None = None) -> np.ndarray:
    """BERT's exact GELU, 0.5·x·(1 + erf(x/√2)), of ``x + bias``, written over ``x`` (which it returns).

    x·erf(x/√2) is |x|·erf(|x|/√2) (both odd), so erf is evaluated on |x| only, with no sign to restore. It
    runs over blocks of ``_GELU_ROWS`` rows, so that its dozen passes read and write the cache, not memory:
    over a batch's (512, 1536) activations at once it cost a third of the encoder's time, in blocks a tenth.
    ``scratch``: three (``_GELU_ROWS``, columns) float32 arrays' room, (3, rows, columns), or None."""
    rows, cols = x.shape
    if scratch is None:
        scratch = np.empty((3, min(rows, _GELU_ROWS), cols), dtype=np.float32)
    for r in range(0, rows, _GELU_ROWS):
        xb = x[r:r + _GELU_ROWS]
        n = xb.shape[0]
        a, t, y = scratch[0, :n], scratch[1, :n], scratch[2, :n]
        if bias is not None:
            xb += bias
        np.abs(xb, out=a)
        np.multiply(a, _TP, out=t)
        t += 1
        np.divide(1, t, out=t)
        np.multiply(t, _AS[0], out=y)
        for c in _AS[1:]:
            y += c
            y *= t
        np.multiply(xb, xb, out=t)
        t *= np.float32(-0.5)
        np.exp(t, out=t)
        y *= t  # erfc(|x|/√2)
        y *= a
        np.subtract(a, y, out=y)  # |x|·erf(|x|/√2)
        xb += y
        xb *= np.float32(0.5)
    return x


_GELU_ROWS = 32  # 32 rows of 1,536 and their three temporaries stay in a core's cache; 16 and 64 were slower


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float,
                scratch: np.ndarray | None = None) -> np.ndarray:
    """LayerNorm over the last axis of the 2-D ``x``, written over ``x`` (which it returns); ``scratch``: room for
    two (rows, 1) float32 columns, or None."""
    rows, dim = x.shape
    if scratch is None:
        scratch = np.empty((2, rows, 1), dtype=np.float32)
    mean, var = scratch[0, :rows], scratch[1, :rows]
    np.sum(x, axis=1, keepdims=True, out=mean)
    mean *= np.float32(1 / dim)
    x -= mean
    np.einsum("ij,ij->i", x, x, out=var[:, 0])
    var *= np.float32(1 / dim)
    var += np.float32(eps)
    np.sqrt(var, out=var)
    np.divide(1, var, out=var)
    x *= var
    x *= weight
    x += bias
    return x


class _Workspace:
    """One batch's activations, allocated once per ``encode`` and thread: a batch then allocates nothing but
    its attention scores (a fresh multi-megabyte array per product cost page faults on every layer)."""

    def __init__(self, rows: int, dim: int, inner: int):
        self.rows = rows
        self.x = np.empty((rows, dim), dtype=np.float32)
        self.attended = np.empty((rows, dim), dtype=np.float32)
        self.context = np.empty((rows, dim), dtype=np.float32)
        self.qkv = np.empty((rows, 3 * dim), dtype=np.float32)
        self.inner = np.empty((rows, inner), dtype=np.float32)
        self.gelu = np.empty((3, min(rows, _GELU_ROWS), inner), dtype=np.float32)
        self.norm = np.empty((2, rows, 1), dtype=np.float32)


class NumpyBertEncoder:
    """Mean-pooled, normalised BERT sentence embeddings in float32 numpy."""

    # A batch holds as many texts as fit this many tokens at the batch's longest (texts are sorted by length,
    # so there is little padding); on 2 cores 256-512 were the fastest (smaller products stay in cache), and it
    # bounds a batch's memory (about 10 MB of activations whatever the texts' length). benchmarks/embed_speed.py
    BATCH_TOKENS = 512

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
        w = {k[len(prefix):]: v.astype(np.float32, copy=False) for k, v in weights.items() if k.startswith(prefix)}
        del weights
        self.w = {k: v for k, v in w.items() if k.startswith("embeddings.")}
        # token type 0 for every token, as sentence-transformers passes: one row added to the positions once
        self._positions = np.ascontiguousarray(self.w["embeddings.position_embeddings.weight"]
                                               + self.w["embeddings.token_type_embeddings.weight"][0])
        self._layers = [self._layer_weights(w, i) for i in range(self.layers)]
        self.inner = self._layers[0]["up"].shape[1]

    def _layer_weights(self, w: dict[str, np.ndarray], i: int) -> dict[str, np.ndarray]:
        """Layer ``i``'s weights as the products want them: transposed and contiguous, query, key and value as
        one (dim, 3·dim) matrix with the attention's 1/√d folded into the query's part."""
        p = f"encoder.layer.{i}."
        a = p + "attention.self."
        scale = np.float32(1 / np.sqrt(self.dim // self.heads))
        qkv = np.concatenate([w[a + "query.weight"] * scale, w[a + "key.weight"], w[a + "value.weight"]])
        return {
            "qkv": np.ascontiguousarray(qkv.T),
            "qkv_bias": np.concatenate([w[a + "query.bias"] * scale, w[a + "key.bias"], w[a + "value.bias"]]),
            "out": np.ascontiguousarray(w[p + "attention.output.dense.weight"].T),
            "out_bias": w[p + "attention.output.dense.bias"],
            "ln1": (w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"]),
            "up": np.ascontiguousarray(w[p + "intermediate.dense.weight"].T),
            "up_bias": w[p + "intermediate.dense.bias"],
            "down": np.ascontiguousarray(w[p + "output.dense.weight"].T),
            "down_bias": w[p + "output.dense.bias"],
            "ln2": (w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"]),
        }

    def _layer(self, x: np.ndarray, bias: np.ndarray, i: int, batch: int, length: int, ws: _Workspace) -> None:
        """One encoder layer over ``x`` (batch * length, dim), in place, in ``ws``'s arrays. Every product is
        BLAS's: the 2-D ones written into the workspace (``out=``), the attention's over strided views of the
        query/key/value product (each head's matrix has unit stride along its rows, which BLAS takes as it is),
        so nothing is copied to split heads or join them."""
        w = self._layers[i]
        n, dim = x.shape
        heads = self.heads
        d = dim // heads
        qkv = np.matmul(x, w["qkv"], out=ws.qkv[:n])
        qkv += w["qkv_bias"]
        parts = qkv.reshape(batch, length, 3, heads, d)
        q = parts[:, :, 0].transpose(0, 2, 1, 3)  # (batch, heads, length, d), q carries the 1/√d
        k = parts[:, :, 1].transpose(0, 2, 3, 1)  # (batch, heads, d, length)
        v = parts[:, :, 2].transpose(0, 2, 1, 3)
        scores = np.matmul(q, k)
        scores += bias
        scores -= scores.max(-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(-1, keepdims=True)
        context = ws.context[:n]
        np.matmul(scores, v, out=context.reshape(batch, length, heads, d).transpose(0, 2, 1, 3))
        attended = np.matmul(context, w["out"], out=ws.attended[:n])
        attended += w["out_bias"]
        attended += x
        _layer_norm(attended, *w["ln1"], self.eps, ws.norm)
        inner = np.matmul(attended, w["up"], out=ws.inner[:n])
        _gelu(inner, w["up_bias"], ws.gelu)
        np.matmul(inner, w["down"], out=x)
        x += w["down_bias"]
        x += attended
        _layer_norm(x, *w["ln2"], self.eps, ws.norm)

    def _forward(self, ids: np.ndarray, mask: np.ndarray, ws: _Workspace | None = None) -> np.ndarray:
        w = self.w
        batch, length = ids.shape
        if ws is None or ws.rows < batch * length:
            ws = _Workspace(batch * length, self.dim, self.inner)
        x = ws.x[:batch * length]
        np.take(w["embeddings.word_embeddings.weight"], ids.reshape(-1), axis=0, out=x)
        x.reshape(batch, length, -1)[...] += self._positions[:length]
        _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps, ws.norm)
        bias = ((1.0 - mask[:, None, None, :]) * np.finfo(np.float32).min).astype(np.float32)
        for i in range(self.layers):
            self._layer(x, bias, i, batch, length, ws)
        pooled = np.einsum("bld,bl->bd", x.reshape(batch, length, -1), mask)
        pooled /= np.maximum(mask.sum(1, keepdims=True), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

    def encode(self, texts: list[str], batch_size: int | None = None, threads: int = 1,
               batch_tokens: int | None = None) -> np.ndarray:
        """One L2-normalised row per text. Texts are batched by length so padding stays small
        (``length_batches``). ``threads``: the cores to use. With more than one, batches run on that many
        threads at once, each with one BLAS thread (numpy releases the GIL in its products and element-wise
        loops), and a single batch (a query) on the calling thread with BLAS as it is set; with one,
        everything runs on the calling thread with one BLAS thread (on a loaded 2-core machine a query took
        53 ms so, against 170 ms with OpenBLAS's two spinning threads)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        encodings = self.tokenizer.encode_batch(texts)
        lengths = [len(e.ids) for e in encodings]
        plan = length_batches(lengths, batch_tokens or self.BATCH_TOKENS, batch_size)
        rows = max((len(b) * lengths[b[-1]] for b in plan), default=0)
        spare: list[_Workspace] = []  # one workspace per thread at work, handed from batch to batch

        def run(batch: list[int]) -> None:
            length = lengths[batch[-1]]  # the longest: rows are sorted by length
            ids = np.zeros((len(batch), length), dtype=np.int64)
            mask = np.zeros((len(batch), length), dtype=np.float32)
            for r, i in enumerate(batch):
                ids[r, :lengths[i]] = encodings[i].ids
                mask[r, :lengths[i]] = 1.0
            try:
                ws = spare.pop()
            except IndexError:
                ws = _Workspace(rows, self.dim, self.inner)
            out[batch] = self._forward(ids, mask, ws)
            spare.append(ws)

        if threads > 1 and len(plan) == 1:
            run(plan[0])
            return out
        with _one_blas_thread():
            if threads <= 1 or len(plan) <= 1:
                for batch in plan:
                    run(batch)
            else:
                from concurrent.futures import ThreadPoolExecutor

                with ThreadPoolExecutor(min(threads, len(plan)), thread_name_prefix="localpager-embed") as pool:
                    for _ in pool.map(run, plan):
                        pass
        return out


def length_batches(lengths: list[int], batch_tokens: int, batch_size: int | None = None) -> list[list[int]]:
    """Text indices (of ``lengths``, their token counts) in batches: sorted by length, each batch as many texts
    as fit ``batch_tokens`` at its longest's length (one text at least), and at most ``batch_size`` if given."""
    out: list[list[int]] = []
    for i in sorted(range(len(lengths)), key=lambda i: lengths[i]):
        if out and (len(out[-1]) + 1) * lengths[i] <= batch_tokens and len(out[-1]) < (batch_size or len(lengths)):
            out[-1].append(i)
        else:
            out.append([i])
    return out


def _one_blas_thread():
    """BLAS limited to one thread for the duration (threadpoolctl, which comes with sentence-transformers):
    OpenBLAS's own threads split a product of this size poorly, and spin while they wait, which collapses
    on a machine where other work runs (1,024 turns: 12 turns/s with two OpenBLAS threads on a loaded
    2-core machine, 49 with one). Without threadpoolctl, BLAS keeps its setting."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        from contextlib import nullcontext

        return nullcontext()
    return threadpool_limits(1, user_api="blas")
