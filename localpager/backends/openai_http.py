"""A model you already serve, over HTTP: llama.cpp's ``llama-server``, llama-cpp-python's server, Ollama,
LM Studio or vLLM (``--backend openai-http --base-url http://127.0.0.1:8080/v1``).

The core hands a backend token ids, so this backend keeps the two things that make localpager work on a
server too: the prompt is the model's own chat template with user text tokenized as text (rendered here,
from the template the server reports or a local GGUF file's), and consecutive prompts share their prefix so
the server's prompt cache applies. The model's output stays constrained (``backends.constraints``: the
recall decision, a "when" answer's dates, the side work's keywords, eviction advice and worth verdicts): GBNF
(``grammar``) where the server takes it, a JSON schema (``json_schema`` / ``format`` / ``response_format``)
otherwise, read back into the text the grammar would give; when it takes neither, the backend refuses every
constraint by name and the runtime recalls by its selector alone; free text is never parsed as a decision.

What each server gets (found once, at start):

=================  ======================  =============  ============================  =================
server             completions             prompt sent    constraint                    tokens counted by
=================  ======================  =============  ============================  =================
llama-server       ``POST /completion``    token ids      GBNF ``grammar``              ``POST /tokenize``
llama-cpp-python   ``POST /v1/completions``  text         GBNF ``grammar``              ``/extras/tokenize``
Ollama             ``POST /api/generate``  text (raw)     JSON schema ``format``        local GGUF
vLLM / LM Studio   ``POST /v1/completions``  ids / text   ``response_format`` schema    ``/tokenize`` or local
=================  ======================  =============  ============================  =================

httpx is imported lazily (the ``http`` extra).
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator, Sequence

from ..core.choices import choose
from .base import BackendError, ChatBackend, Generation, Message, TextCallback
from .choices import ConstraintFormat
from .constraints import Constraint
from .template import ChatTemplate

DEFAULT_BASE_URL = "http://127.0.0.1:8080/v1"
DEFAULT_N_CTX = 2048
KINDS = ("llama-server", "llama-cpp-python", "ollama", "openai")
ENV = {"base_url": "LOCALPAGER_BASE_URL", "api_key": "LOCALPAGER_API_KEY", "tokenizer": "LOCALPAGER_TOKENIZER",
       "constraint": "LOCALPAGER_CONSTRAINT", "allow_estimate": "LOCALPAGER_ALLOW_ESTIMATE"}
PROBE_GRAMMAR = 'root ::= "7"\n'
PROMPTS_KEPT, PIECES_KEPT = 64, 4096  # the text of the last prompts rendered and of the last texts tokenized
PROBE_SCHEMA = {"type": "object", "properties": {"n": {"type": "integer", "enum": [7]}}, "required": ["n"]}


def _httpx():
    try:
        import httpx
    except ImportError:
        raise BackendError("the openai-http backend needs httpx: pip install 'localpager[http]'") from None
    return httpx


def _line(text: Any, limit: int = 200) -> str:
    text = str(text).strip()
    return (text.splitlines()[0] if text else "")[:limit]


class ServerUnreachable(BackendError):
    """No answer from the server: connection refused, a timeout."""


class ServerRejected(BackendError):
    """The server answered the request with an HTTP error (it is up, but refused this request)."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


# -- tokenizers ---------------------------------------------------------------------------------------
class LocalTokenizer:
    """A GGUF file's vocabulary (no weights): exact counts, and the file's chat template."""

    exact = True

    def __init__(self, path: str | os.PathLike):
        from .tokenizers import counter_for

        self._counter = counter_for(str(path))
        self.name = self._counter.name
        llama = self._counter._llama
        self.template = llama.metadata.get("tokenizer.chat_template")
        self.bos = [llama.token_bos()] if llama.metadata.get("tokenizer.ggml.add_bos_token") == "true" else []

    def plain(self, text: str) -> list[int]:
        return self._counter.tokenize(text)

    def special(self, text: str) -> list[int]:
        return self._counter._llama.tokenize(text.encode("utf-8"), add_bos=False, special=True)

    def detokenize(self, tokens: Sequence[int]) -> str | None:
        return self._counter._llama.detokenize(list(tokens), special=True).decode("utf-8", errors="replace")


class RemoteTokenizer:
    """The served model's own tokenizer, through the server's tokenize endpoint."""

    exact = True
    template = None

    def __init__(self, backend: "OpenAIHTTPBackend", kind: str, name: str):
        self.backend, self.kind, self.name = backend, kind, name
        self.bos: list[int] = []
        self.local: LocalTokenizer | None = None  # the served model's own GGUF, when it is on this machine
        if kind == "llama-cpp-python":  # /extras/tokenize adds the model's BOS, if it has one: strip it
            self._strip = self._call("", special=True)
        else:
            self._strip = []
            self.bos = self._call("", special=True, add_special=True)

    def _call(self, text: str, special: bool, add_special: bool = False) -> list[int]:
        b = self.backend
        if self.kind == "llama-server":
            # parse_special is honoured by llama-server builds from 2024 on; older ones parse control tokens
            data = b.post_json(f"{b.root}/tokenize", {"content": text, "add_special": add_special,
                                                      "parse_special": special})
        elif self.kind == "llama-cpp-python":  # always parses control tokens (special=True)
            data = b.post_json(f"{b.root}/extras/tokenize", {"input": text, "model": b.model})
        else:  # vLLM
            data = b.post_json(f"{b.root}/tokenize", {"model": b.model, "prompt": text,
                                                      "add_special_tokens": add_special})
        tokens = data.get("tokens") if isinstance(data, dict) else None
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
            raise BackendError(f"the model server's tokenize endpoint answered without a token list: {_line(data)}")
        return tokens

    def _stripped(self, tokens: list[int]) -> list[int]:
        n = len(self._strip)
        return tokens[n:] if n and tokens[:n] == self._strip else tokens

    def plain(self, text: str) -> list[int]:
        return self._stripped(self._call(text, special=False))

    def special(self, text: str) -> list[int]:
        return self._stripped(self._call(text, special=True))

    def detokenize(self, tokens: Sequence[int]) -> str | None:
        b = self.backend
        if self.kind == "llama-server":  # renders control tokens as their text
            return b.post_json(f"{b.root}/detokenize", {"tokens": list(tokens)}).get("content")
        if self.local is not None:  # the served file's own vocabulary: exact, control tokens included
            return self.local.detokenize(tokens)
        return None  # llama-cpp-python's /extras/detokenize drops control tokens: not usable for a prompt


class EstimateTokenizer:
    """No tokenizer: about one token per word piece of at most four characters. Only with
    ``allow_estimate``, and its name says it is an estimate (stored counts and the trace show it).

    The ids are interned pieces of text, so they turn back into exactly the text they came from."""

    exact = False
    template = None
    bos: list[int] = []
    _PIECES = re.compile(r"\w{1,4}|\s+|[^\w\s]", re.UNICODE)

    def __init__(self, name: str):
        self.name = f"estimate:{name}"
        self._ids: dict[str, int] = {}
        self._pieces: list[str] = []

    def plain(self, text: str) -> list[int]:
        out = []
        for piece in self._PIECES.findall(text):
            if piece not in self._ids:
                self._ids[piece] = len(self._pieces)
                self._pieces.append(piece)
            out.append(self._ids[piece])
        return out

    special = plain

    def detokenize(self, tokens: Sequence[int]) -> str | None:
        return "".join(self._pieces[t] for t in tokens)


# -- the backend ------------------------------------------------------------------------------------
@dataclass
class _Stream:
    """What one streamed completion reported."""

    pieces: list[str] = field(default_factory=list)
    done: bool = False
    finish: str | None = None
    tokens: list[int] = field(default_factory=list)
    evaluated: int | None = None
    reused: int | None = None
    prefill_ms: float | None = None
    decode_ms: float | None = None


@dataclass(frozen=True)
class ServerOptions:
    """How ``OpenAIHTTPBackend`` reaches and uses the server, each as ``--backend openai-http``'s option of the
    same name (an option not given is read from its ``LOCALPAGER_`` variable, ``ENV``).

    ``tokenizer`` is a local GGUF file whose vocabulary and chat template are the served model's (needed for
    Ollama and LM Studio, which expose neither); ``constraint`` is ``auto`` (probe the server once), ``gbnf``,
    ``json-schema`` or ``none``; ``allow_estimate`` lets token counts be estimated when there is no tokenizer;
    ``chat_template`` replaces the served model's (``chatml`` or a Jinja file)."""

    base_url: str | None = None
    api_key: str | None = None
    tokenizer: str | os.PathLike | None = None
    constraint: str | None = None
    allow_estimate: bool | None = None
    timeout: float = 120.0
    chat_template: str | None = None


class OpenAIHTTPBackend(ChatBackend):
    """A chat model behind an HTTP server; see the module docstring for what each server gets.

    ``model_path`` names the served model (default: the server's first); ``options`` are ``ServerOptions``'
    fields, by name (the factory takes keyword arguments: ``load_backend("openai-http", base_url=...)``);
    ``transport``: an ``httpx`` transport in place of the network (a test's mock server)."""

    name = "openai-http"

    def __init__(self, model_path: str | os.PathLike | None = None, n_ctx: int = DEFAULT_N_CTX, *,
                 transport=None, **options: Any):
        httpx = _httpx()
        given = ServerOptions(**options)
        env = lambda key: os.environ.get(ENV[key]) or None
        self.base_url = (given.base_url or env("base_url") or DEFAULT_BASE_URL).rstrip("/")
        self.root = re.sub(r"/v1$", "", self.base_url)
        self.timeout = timeout = given.timeout
        try:
            self.constraint = choose(ConstraintFormat, given.constraint or env("constraint") or ConstraintFormat.AUTO,
                                     "constraint")
        except ValueError as exc:
            raise BackendError(str(exc)) from None
        allow_estimate = given.allow_estimate
        if allow_estimate is None:
            allow_estimate = (env("allow_estimate") or "").lower() in ("1", "true", "yes")
        api_key = given.api_key or env("api_key")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.Client(headers=headers, transport=transport,
                                   timeout=httpx.Timeout(timeout, connect=min(timeout, 5.0)))
        self.lock = threading.RLock()
        self._texts: OrderedDict[tuple[int, ...], str] = OrderedDict()  # prompt tokens -> the text they stand for
        self._pieces: OrderedDict[tuple[int, ...], str] = OrderedDict()  # tokenize()'s answers -> their text
        self._texts_lock = threading.Lock()  # not self.lock, which a generation holds while it streams

        self.kind = self._discover_kind()
        self.models = self._models()
        self.model = self._choose_model(str(model_path) if model_path else None)
        self.n_ctx = self._server_n_ctx or n_ctx
        self.tokenizer = self._choose_tokenizer(given.tokenizer or env("tokenizer"), bool(allow_estimate))
        self.estimated = not self.tokenizer.exact
        self.model_name = self.tokenizer.name if isinstance(self.tokenizer, LocalTokenizer) else (
            Path(self.model).name if not self.estimated else self.tokenizer.name)
        self._plain = lru_cache(maxsize=8192)(lambda s: tuple(self.tokenizer.plain(s)))
        self._special = lru_cache(maxsize=512)(lambda s: tuple(self.tokenizer.special(s)))
        template = given.chat_template or self.tokenizer.template or self._server_template
        if not template:
            raise BackendError(f"cannot find the chat template of {self.model!r} on this {self.kind} server: "
                               "pass --tokenizer PATH (the served model's GGUF file)")
        self.template = ChatTemplate(template, self._special, self._plain, self.tokenizer.bos)
        if self.constraint == "auto":
            self.constraint = self._probe_constraint()

    # -- discovery ---------------------------------------------------------------------------------
    _server_template: str | None = None
    _server_n_ctx: int | None = None

    def _discover_kind(self) -> str:
        """Which server this is, from what it answers (each probe is one GET)."""
        props = self._get_or_none(f"{self.root}/props")
        if isinstance(props, dict) and ("default_generation_settings" in props or "chat_template" in props):
            self._server_template = props.get("chat_template") or None
            settings = props.get("default_generation_settings") or {}
            n_ctx = props.get("n_ctx") or settings.get("n_ctx")
            self._server_n_ctx = int(n_ctx) if isinstance(n_ctx, int) and n_ctx > 0 else None
            return "llama-server"
        version = self._get_or_none(f"{self.root}/api/version")
        if isinstance(version, dict) and "version" in version:
            return "ollama"
        spec = self._get_or_none(f"{self.root}/openapi.json")
        paths = spec.get("paths", {}) if isinstance(spec, dict) else {}
        if "/extras/tokenize" in paths:
            return "llama-cpp-python"
        self._vllm_tokenize = "/tokenize" in paths
        return "openai"

    _vllm_tokenize = False

    def _models(self) -> list[str]:
        data = self.get_json(f"{self.base_url}/models")
        models = [m.get("id") for m in data.get("data", []) if isinstance(m, dict) and m.get("id")] \
            if isinstance(data, dict) else []
        if not models:
            raise BackendError(f"the model server at {self.base_url} serves no model (GET /models is empty)")
        return models

    def _choose_model(self, wanted: str | None) -> str:
        if wanted is None:
            return self.models[0]
        for m in self.models:  # exact, then by file name or stem (llama-cpp-python names a model by its path)
            if m == wanted:
                return m
        for m in self.models:
            if Path(m).name == Path(wanted).name or Path(m).stem == wanted or m.split(":")[0] == wanted:
                return m
        raise BackendError(f"the model server does not serve {wanted!r}; it serves {', '.join(self.models)}")

    def _choose_tokenizer(self, path, allow_estimate: bool):
        if path:
            return LocalTokenizer(path)
        if self.kind in ("llama-server", "llama-cpp-python") or (self.kind == "openai" and self._vllm_tokenize):
            tokenizer = RemoteTokenizer(self, self.kind if self.kind != "openai" else "vllm", Path(self.model).name)
            if self.kind == "llama-cpp-python":
                # its server reports no chat template: the local GGUF's, when the served model is that file
                local = self._local_default()
                if local is not None:
                    tokenizer.template, tokenizer.local = local.template, local
            return tokenizer
        local = self._local_default() or self._ollama_blob()
        if local is not None:
            return local
        if allow_estimate:
            return EstimateTokenizer(Path(self.model).name)
        raise BackendError(f"this {self.kind} server has no tokenize endpoint: pass --tokenizer PATH (the served "
                           "model's GGUF file) or --allow-estimate to estimate token counts")

    def _local_default(self) -> LocalTokenizer | None:
        """The default GGUF's tokenizer when the served model is that file (same name), else None."""
        from ..core.modelpaths import ModelNotFoundError, chat_model_path

        try:
            default = chat_model_path()
        except ModelNotFoundError:
            return None
        if self.model != str(default) and Path(self.model).name != default.name:
            return None
        return LocalTokenizer(default)

    def _ollama_blob(self) -> LocalTokenizer | None:
        """Ollama on this machine: its model is a GGUF blob named in the modelfile (``FROM /…/sha256-…``)."""
        if self.kind != "ollama":
            return None
        try:
            show = self.post_json(f"{self.root}/api/show", {"model": self.model})
        except BackendError:
            return None
        found = re.search(r"^FROM (\S+)", show.get("modelfile", ""), re.M) if isinstance(show, dict) else None
        if found and Path(found.group(1)).is_file():
            return LocalTokenizer(found.group(1))
        return None

    def _probe_constraint(self) -> ConstraintFormat:
        """The first of GBNF and JSON schema that the server demonstrably enforces (one short generation
        each, forced to output 7), else none."""
        prompt = list(self._plain("The answer is "))
        self._remember(prompt, "The answer is ")
        if self.kind in ("llama-server", "llama-cpp-python"):
            try:
                if self._complete(prompt, 2, {"grammar": PROBE_GRAMMAR}).text.strip() == "7":
                    return ConstraintFormat.GBNF
            except ServerRejected:
                pass
        if self.kind != "llama-cpp-python":  # its /v1/completions takes no schema
            try:
                text = self._complete(prompt, 12, {"json_schema": PROBE_SCHEMA}).text
                if json.loads(text) == {"n": 7}:
                    return ConstraintFormat.JSON_SCHEMA
            except (ServerRejected, ValueError):
                pass
        return ConstraintFormat.NONE

    # -- HTTP -------------------------------------------------------------------------------------
    def _fail(self, exc: Exception) -> BackendError:
        """One line for what went wrong talking to the server."""
        httpx = _httpx()
        if isinstance(exc, httpx.ConnectError):
            why = "connection refused" if "refused" in str(exc).lower() else _line(exc) or "cannot connect"
            return ServerUnreachable(f"cannot reach the model server at {self.base_url}: {why} (is it running?)")
        if isinstance(exc, httpx.TimeoutException):
            return ServerUnreachable(f"the model server at {self.base_url} did not answer within {self.timeout:g} s")
        if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError)):
            return BackendError(f"the model server at {self.base_url} closed the connection mid-answer")
        return BackendError(f"talking to the model server at {self.base_url} failed: {type(exc).__name__} {_line(exc)}")

    def _check(self, response) -> None:
        if response.status_code < 400:
            return
        try:
            response.read()
            body = response.json()
            detail = body.get("detail") or body.get("error") or body if isinstance(body, dict) else body
            if isinstance(detail, dict):
                detail = detail.get("message") or detail
        except Exception:  # not JSON: the text, or nothing
            detail = getattr(response, "text", "")
        what = {401: "rejected the API key", 403: "refused access", 404: "has no such endpoint"}.get(
            response.status_code, "failed")
        raise ServerRejected(f"the model server {what}: HTTP {response.status_code} {response.request.url.path}"
                             f"{': ' + _line(detail) if _line(detail) else ''}", response.status_code)

    def _request(self, method: str, url: str, body: Any = None) -> Any:
        httpx = _httpx()
        try:
            response = self.client.request(method, url, json=body)
        except httpx.HTTPError as exc:
            raise self._fail(exc) from None
        self._check(response)
        try:
            return response.json()
        except ValueError:
            raise BackendError(f"the model server answered {url} with something other than JSON") from None

    def get_json(self, url: str) -> Any:
        return self._request("GET", url)

    def post_json(self, url: str, body: Any) -> Any:
        return self._request("POST", url, body)

    def _get_or_none(self, url: str) -> Any:
        """GET for discovery: None when the server has no such endpoint (or says anything but 200 JSON)."""
        try:
            return self.get_json(url)
        except ServerRejected as exc:
            if exc.status in (401, 403):
                raise
            return None
        except ServerUnreachable:
            raise
        except BackendError:
            return None

    # -- tokens -----------------------------------------------------------------------------------
    def tokenize(self, text: str) -> list[int]:
        """``text``'s tokens; the backend keeps their text, so a prompt with them appended (a focused answer's
        lead after its rendered prompt) is sent to a server that takes text as exactly that text."""
        if not text:
            return []
        tokens = self._plain(text)
        with self._texts_lock:
            self._pieces[tokens] = text
            self._pieces.move_to_end(tokens)
            while len(self._pieces) > PIECES_KEPT:
                self._pieces.popitem(last=False)
        return list(tokens)

    def count_tokens(self, text: str) -> int:
        return len(self._plain(text)) if text else 0

    def render(self, messages: Sequence[Message], add_generation_prompt: bool = True) -> list[int]:
        tokens, text = self.template.render_text(messages, add_generation_prompt)
        self._remember(tokens, text)
        return tokens

    def _remember(self, tokens: Sequence[int], text: str) -> None:
        with self._texts_lock:
            self._texts[tuple(tokens)] = text
            self._texts.move_to_end(tuple(tokens))
            while len(self._texts) > PROMPTS_KEPT:
                self._texts.popitem(last=False)

    def _text_of(self, tokens: Sequence[int]) -> str:
        """The text a prompt's tokens stand for: what this backend handed them out for (``_known_text``, exact),
        else the tokenizer's own detokenization."""
        text = self._known_text(tokens)
        if text is None:
            text = self.tokenizer.detokenize(tokens)
        if text is None:
            raise BackendError("cannot turn these prompt tokens back into text for this server: "
                               "pass --tokenizer PATH (the served model's GGUF file)")
        return text

    def _known_text(self, tokens: Sequence[int]) -> str | None:
        """The text of ``tokens`` as handed out here: a rendered prompt (or one with what was generated after
        it), then, piece by piece, what ``tokenize`` answered for the tokens after it. None when some part
        was not handed out by this backend. A prompt so composed is remembered whole."""
        key = tuple(tokens)
        with self._texts_lock:
            if key in self._texts:
                return self._texts[key]
            head = max((k for k in self._texts if len(k) < len(key) and key[:len(k)] == k), key=len, default=())
            parts, rest = [self._texts[head]] if head else [], key[len(head):]
            lengths = sorted({len(k) for k in self._pieces}, reverse=True)
            while rest:
                n = next((n for n in lengths if n <= len(rest) and rest[:n] in self._pieces), 0)
                if not n:
                    return None
                parts.append(self._pieces[rest[:n]])
                rest = rest[n:]
        text = "".join(parts)
        self._remember(key, text)
        return text

    # -- generation -------------------------------------------------------------------------------
    def fork(self) -> "OpenAIHTTPBackend":
        """The same server: llama-server keeps one cache per slot and sends a prompt to the slot holding the
        most similar one; llama-cpp-python's server and Ollama keep one, which side work then replaces."""
        return self

    def expresses(self, constraint: Constraint) -> bool:
        """Whether this server can hold output to ``constraint``: every constraint renders to GBNF and to a JSON
        schema, so any server but one that takes neither."""
        return self.constraint in ("gbnf", "json-schema")

    def generate(self, prompt: Sequence[int], *, max_tokens: int, constraint: Constraint | None = None,
                 on_text: TextCallback | None = None, repeat_penalty: float = 1.0) -> Generation:
        """A greedy completion. ``constraint`` goes to the server as GBNF or as a JSON schema (what the server
        took when probed); JSON comes back read into the text the GBNF would have produced
        (``Constraint.read_json``), in one piece: ``on_text`` sees it whole, at the end."""
        if len(prompt) + max_tokens > self.n_ctx:
            raise BackendError(
                f"prompt of {len(prompt)} tokens plus {max_tokens} to generate exceeds the context of {self.n_ctx}")
        sent: dict[str, Any] = {}
        as_json = False
        if constraint is not None:
            if self.constraint == "gbnf":
                sent = {"grammar": constraint.gbnf()}
            elif self.constraint == "json-schema":
                sent, as_json = {"json_schema": constraint.json_schema(), "name": constraint.schema_name}, True
                max_tokens = self._json_budget(constraint, max_tokens, len(prompt))
            else:
                raise BackendError(f"this model server cannot constrain output (no GBNF grammar, no JSON schema), so "
                                   f"it cannot give {constraint.what} ({type(constraint).__name__}): localpager will "
                                   "not parse free text as one")
        with self.lock:
            gen = self._complete(list(prompt), max_tokens, sent, None if as_json else on_text, repeat_penalty)
            if as_json:
                try:
                    gen.text = constraint.read_json(gen.text)
                except (ValueError, TypeError) as exc:
                    raise BackendError(f"the model server did not keep to the JSON schema of {constraint.what} "
                                       f"(got {_line(gen.text, 80)!r}: {exc}); use --constraint none") from None
                gen.tokens = list(self._plain(gen.text)) if gen.text else []
                if on_text is not None and gen.text:
                    on_text(gen.text)
            if (text := self._known_text(prompt)) is not None:  # a continuation after these tokens is this text
                self._remember(list(prompt) + gen.tokens, text + gen.text)
        return gen

    def _json_budget(self, constraint: Constraint, max_tokens: int, prompt: int) -> int:
        """``max_tokens`` counts the output the GBNF would give; its JSON also names its keys (``{"recall": …}``)
        and may space differently. The server stops where the schema ends, so the extra is only a ceiling."""
        keys = constraint.json_schema().get("required", [])
        extra = 8 + sum(self.count_tokens(json.dumps(k)) + 2 for k in keys)
        return max(1, min(max_tokens + extra, self.n_ctx - prompt))

    def _complete(self, prompt: list[int], max_tokens: int, constraint: dict[str, Any],
                  on_text: TextCallback | None = None, repeat_penalty: float = 1.0) -> Generation:
        """One streamed greedy completion; stops reading (and so the server) when ``on_text`` says so."""
        httpx = _httpx()
        url, body, parse = self._request_for(prompt, max_tokens, constraint, repeat_penalty)
        out = _Stream()
        text, stopped = "", "length"
        start = time.perf_counter()
        first = None
        try:
            with self.client.stream("POST", url, json=body) as response:
                self._check(response)
                for event in parse(response.iter_lines()):
                    _merge(out, event)
                    piece = event.get("piece", "")
                    if piece:
                        if first is None:
                            first = time.perf_counter()
                        text += piece
                        if on_text is not None and on_text(piece):
                            stopped = "caller"
                            break
                    if out.done:
                        break
        except httpx.HTTPError as exc:
            raise self._fail(exc) from None
        end = time.perf_counter()
        if stopped != "caller":
            if not out.done and out.finish is None:
                raise BackendError(f"the model server at {self.base_url} closed the stream mid-answer")
            stopped = {"stop": "eos", "eos": "eos", "length": "length", "limit": "length"}.get(out.finish or "", "eos")
        first = first or end
        tokens = out.tokens or (list(self._plain(text)) if text else [])
        reported = out.evaluated is not None
        evaluated = out.evaluated if reported else len(prompt)
        reused = out.reused if out.reused is not None else (0 if not reported else max(0, len(prompt) - evaluated))
        timings = {"reported": float(reported)}
        if self.estimated:
            timings["estimated"] = 1.0
        return Generation(
            text=text, tokens=tokens, prompt_tokens=len(prompt), evaluated=evaluated, reused=reused,
            prefill_ms=out.prefill_ms if out.prefill_ms is not None else (first - start) * 1000,
            decode_ms=out.decode_ms if out.decode_ms is not None else (end - first) * 1000,
            stopped=stopped, timings=timings,
        )

    def _request_for(self, prompt: list[int], max_tokens: int, constraint: dict[str, Any], repeat_penalty: float):
        """URL, JSON body and stream parser of a greedy completion on this kind of server."""
        grammar, schema = constraint.get("grammar"), constraint.get("json_schema")
        name = constraint.get("name", "decision")
        if self.kind == "llama-server":
            body = {"prompt": prompt, "n_predict": max_tokens, "temperature": 0.0, "top_k": 1, "top_p": 1.0,
                    "min_p": 0.0, "repeat_penalty": repeat_penalty, "cache_prompt": True, "stream": True,
                    "return_tokens": True}
            if grammar:
                body["grammar"] = grammar
            if schema:
                body["json_schema"] = schema
            return f"{self.root}/completion", body, _llama_server_events
        if self.kind == "ollama":
            body = {"model": self.model, "prompt": self._text_of(prompt), "raw": True, "stream": True,
                    "options": {"temperature": 0.0, "top_k": 1, "num_predict": max_tokens,
                                "repeat_penalty": repeat_penalty, "num_ctx": self.n_ctx}}
            if schema:
                body["format"] = schema
            return f"{self.root}/api/generate", body, _ollama_events
        body = {"model": self.model, "max_tokens": max_tokens, "temperature": 0.0, "top_p": 1.0,
                "stream": True}
        if self.kind == "llama-cpp-python":  # its prompt must be text (a list of ints is refused)
            body.update(prompt=self._text_of(prompt), top_k=1, min_p=0.0, repeat_penalty=repeat_penalty)
            if grammar:
                body["grammar"] = grammar
        else:  # vLLM takes token ids; LM Studio and others text
            body.update(prompt=prompt if self._vllm_tokenize else self._text_of(prompt),
                        stream_options={"include_usage": True})
            if repeat_penalty != 1.0:
                body["repetition_penalty"] = repeat_penalty
            if schema:
                body["response_format"] = {"type": "json_schema",
                                           "json_schema": {"name": name, "strict": True, "schema": schema}}
        return f"{self.base_url}/completions", body, _openai_events

    def close(self) -> None:
        self.client.close()


# -- stream parsers: each yields events {"piece", "done", "finish", "tokens", "evaluated", "reused", ...} ------
def _sse(lines: Iterator[str]) -> Iterator[Any]:
    for line in lines:
        if not line.startswith("data:"):
            continue  # comments (": ping"), event names, blank separators
        data = line[5:].strip()
        if data == "[DONE]":
            yield "[DONE]"
            return
        try:
            yield json.loads(data)
        except ValueError:
            raise BackendError(f"the model server sent a malformed stream event: {_line(data, 80)}") from None


def _error(event: Any) -> None:
    if isinstance(event, dict) and event.get("error"):
        err = event["error"]
        raise BackendError(f"the model server failed mid-answer: {_line(err.get('message', err) if isinstance(err, dict) else err)}")


def _openai_events(lines: Iterator[str]) -> Iterator[dict]:
    for event in _sse(lines):
        if event == "[DONE]":
            yield {"done": True}
            return
        _error(event)
        out: dict[str, Any] = {}
        choices = event.get("choices") or []
        if choices:
            out["piece"] = choices[0].get("text") or ""
            if choices[0].get("finish_reason"):
                out["finish"] = choices[0]["finish_reason"]
        usage = event.get("usage") or {}
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
        if cached is not None and usage.get("prompt_tokens") is not None:
            out.update(reused=cached, evaluated=usage["prompt_tokens"] - cached)
        timings = event.get("timings") or {}  # llama-server's OpenAI endpoints add its timings
        if "prompt_n" in timings:
            out.update(evaluated=timings["prompt_n"], reused=timings.get("cache_n", 0))
        yield out


def _llama_server_events(lines: Iterator[str]) -> Iterator[dict]:
    for event in _sse(lines):
        if event == "[DONE]":
            yield {"done": True}
            return
        _error(event)
        out: dict[str, Any] = {"piece": event.get("content") or ""}
        if not event.get("stop"):  # the final event may repeat every token: take them from the pieces
            out["tokens"] = event.get("tokens") or []
        else:
            out.update(done=True, finish=event.get("stop_type") or "eos")
            timings = event.get("timings") or {}
            if "prompt_n" in timings:
                out.update(evaluated=timings["prompt_n"], reused=timings.get("cache_n", 0),
                           prefill_ms=timings.get("prompt_ms"), decode_ms=timings.get("predicted_ms"))
            elif "tokens_cached" in event and "tokens_evaluated" in event:
                out.update(evaluated=event["tokens_evaluated"] - event["tokens_cached"], reused=event["tokens_cached"])
        yield out


def _ollama_events(lines: Iterator[str]) -> Iterator[dict]:
    for line in lines:
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError:
            raise BackendError(f"the model server sent a malformed stream line: {_line(line, 80)}") from None
        _error(event)
        out: dict[str, Any] = {"piece": event.get("response") or ""}
        if event.get("done"):
            out.update(done=True, finish=event.get("done_reason") or "stop")
            if "prompt_eval_count" in event:  # Ollama counts only the prompt tokens it evaluated
                out["evaluated"] = event["prompt_eval_count"]
            if "prompt_eval_duration" in event:
                out["prefill_ms"] = event["prompt_eval_duration"] / 1e6
            if "eval_duration" in event:
                out["decode_ms"] = event["eval_duration"] / 1e6
        yield out
        if event.get("done"):
            return


def _merge(out: _Stream, event: dict) -> None:
    if event.get("tokens"):
        out.tokens += list(event["tokens"])
    for key in ("evaluated", "reused", "prefill_ms", "decode_ms", "finish"):
        if event.get(key) is not None:
            setattr(out, key, event[key])
    if event.get("done"):
        out.done = True
