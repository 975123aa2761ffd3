"""What the model's output may be, as typed objects; each backend renders them for its engine.

The runtime says what it needs (``RecallChoice``: a recall of some pages or an answer; ``OneOf``: exactly one
of some strings; ``JsonList`` / ``JsonObject``: JSON built from given candidates; ``Phrase``: a short text of
given characters) and a backend turns it into what its engine takes:

- ``gbnf()``: a GBNF grammar (llama.cpp in process, llama-server, llama-cpp-python's server). Built from the
  constraint's own fields (integers, and strings written as escaped literals), never parsed from anything,
  so it is always valid; ``tests/`` check that every grammar allows exactly what the constraint means.
- ``json_schema()``: a JSON schema, always an object at the top (what Ollama's ``format``, llama-server's
  ``json_schema`` and OpenAI-style ``response_format`` all take); ``read_json(text)`` turns the server's JSON
  back into the very text the grammar would have produced, so the runtime reads one format whatever the
  server (``ValueError`` when the JSON does not keep to the schema: it is never taken as an answer).

A server that takes neither cannot express any of them (``OpenAIHTTPBackend`` says so, naming the
constraint); ``expresses(backend, constraint)`` asks a backend before relying on one.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Sequence, Union

# The recall call the model writes to ask for pages (``runtime.grammar.parse_decision`` reads it).
RECALL_PREFIX = "recall(page_ids=["
_ANY_CHAR = "[^\\x00]"


def recall_call(page_ids: Sequence[int]) -> str:
    """The text of a recall naming ``page_ids``, as the grammar writes it."""
    return f"{RECALL_PREFIX}{','.join(str(i) for i in page_ids)}])"


# -- GBNF pieces ---------------------------------------------------------------------------------------
def _gbnf_text(text: str) -> str:
    """A GBNF literal matching exactly ``text`` (JSON's escapes are GBNF's)."""
    return json.dumps(text, ensure_ascii=False)


def _gbnf_json_string(text: str) -> str:
    """A GBNF literal matching ``text`` written as a JSON string (quotes and escapes included)."""
    return _gbnf_text(json.dumps(text, ensure_ascii=False))


def _json_item(item: str | int) -> str:
    return json.dumps(item, ensure_ascii=False)


def _list_rule(name: str, item: str, most: int, least: int = 1) -> str:
    """``name ::= "[" item (", " item)... "]"`` with ``least``..``most`` items (written out, no ``{m,n}``)."""
    if most < 1:
        return f'{name} ::= "[]"'
    required = min(max(least, 1), most)
    optional = most - required
    body = '"[" ' + item + "".join(' ", " ' + item for _ in range(required - 1))
    body += "".join(' (", " ' + item for _ in range(optional)) + ")?" * optional + ' "]"'
    return f"{name} ::= {body}" + (' | "[]"' if least == 0 else "")


def _not_recall_rule() -> str:
    """Any text that does not start with ``recall(``: diverge from it at some character."""
    word = "recall("
    options = []
    for n in range(len(word)):
        prefix = f'"{word[:n]}" ' if n else ""
        options.append(f"{prefix}[^{word[n]}] rest")
    options += [f'"{word[:n]}"' for n in range(1, len(word))]
    return " | ".join(options)


def _object_schema(key: str, value: dict) -> dict:
    return {"type": "object", "additionalProperties": False, "required": [key], "properties": {key: value}}


def _member(text: str, key: str) -> Any:
    """The value of ``key`` in the JSON object ``text`` (``ValueError`` if there is none)."""
    data = json.loads(text)
    if not isinstance(data, dict) or key not in data:
        raise ValueError(f"no {key!r} in the JSON object")
    return data[key]


# -- the constraints -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RecallChoice:
    """The recall decision: ``recall(page_ids=[..])`` naming 1..``max_pages`` of ``page_ids`` or, if
    ``allow_answer``, any other text (the start of a direct answer).

    As JSON: ``{"recall": [ids]}``, an empty list meaning "answer" (read back as ""; the answer then
    starts afresh)."""

    page_ids: tuple[int, ...]
    max_pages: int = 2
    allow_answer: bool = True

    def __post_init__(self) -> None:
        ids = tuple(sorted({int(i) for i in self.page_ids}))
        if not ids:
            raise ValueError("a recall choice needs at least one evicted page")
        if self.max_pages < 1:
            raise ValueError("max_pages must be at least 1")
        object.__setattr__(self, "page_ids", ids)

    what = "the recall decision"
    schema_name = "decision"

    def gbnf(self) -> str:
        more = "".join(' ("," id' for _ in range(self.max_pages - 1)) + ")?" * (self.max_pages - 1)
        rules = [
            "root ::= recall" + (" | answer" if self.allow_answer else ""),
            f'recall ::= "{RECALL_PREFIX}" id{more} "])"',
            "id ::= " + " | ".join(f'"{i}"' for i in self.page_ids),
        ]
        if self.allow_answer:
            rules += [f"answer ::= {_not_recall_rule()}", f"rest ::= {_ANY_CHAR}*"]
        return "\n".join(rules) + "\n"

    def json_schema(self) -> dict:
        return _object_schema("recall", {"type": "array", "items": {"type": "integer", "enum": list(self.page_ids)},
                                         "minItems": 0 if self.allow_answer else 1, "maxItems": self.max_pages})

    def read_json(self, text: str) -> str:
        ids = _member(text, "recall")
        if not (isinstance(ids, list) and len(ids) <= self.max_pages and (ids or self.allow_answer)
                and all(type(i) is int and i in self.page_ids for i in ids)):
            raise ValueError("not a recall of offered pages")
        return recall_call(ids) if ids else ""


@dataclass(frozen=True)
class OneOf:
    """Exactly one of ``options`` (any strings; repeats are dropped). As JSON: ``{key: option}``."""

    options: tuple[str, ...]
    key: str = "answer"

    def __post_init__(self) -> None:
        options = tuple(dict.fromkeys(self.options))
        if not options or not all(isinstance(o, str) for o in options):
            raise ValueError("a choice needs at least one option, each a string")
        object.__setattr__(self, "options", options)

    schema_name = "choice"

    @property
    def what(self) -> str:
        return f"a choice of one of {len(self.options)} options"

    def gbnf(self) -> str:
        return "root ::= " + " | ".join(_gbnf_text(o) for o in self.options) + "\n"

    def json_schema(self) -> dict:
        return _object_schema(self.key, {"type": "string", "enum": list(self.options)})

    def read_json(self, text: str) -> str:
        value = _member(text, self.key)
        if value not in self.options or not isinstance(value, str):
            raise ValueError("not one of the options")
        return value


@dataclass(frozen=True)
class JsonList:
    """A JSON list of ``least``..``most`` items drawn from ``items`` (all strings, or all integers; an item
    may repeat), written ``["a", "b"]`` / ``[1, 2]``. As JSON: ``{key: [...]}``."""

    items: tuple[str | int, ...]
    least: int = 1
    most: int = 1
    key: str = "items"

    def __post_init__(self) -> None:
        items = tuple(self.items)
        if not items:
            raise ValueError("a JSON list needs at least one candidate item")
        if not (all(isinstance(i, str) for i in items) or all(type(i) is int for i in items)):
            raise ValueError("a JSON list's items are all strings or all integers")
        if not 0 <= self.least <= self.most:
            raise ValueError("a JSON list needs 0 <= least <= most")
        object.__setattr__(self, "items", items)

    schema_name = "list"

    @property
    def what(self) -> str:
        return f"a JSON list ({self.key})"

    @property
    def numbers(self) -> bool:
        return type(self.items[0]) is int

    def _item_rule(self, name: str) -> str:
        if self.numbers:  # integers: each once, in order
            return f"{name} ::= " + " | ".join(f'"{i}"' for i in sorted(set(self.items)))
        return f"{name} ::= " + " | ".join(_gbnf_json_string(i) for i in self.items)

    def gbnf(self) -> str:
        name = "id" if self.numbers else "kw"
        return "\n".join([_list_rule("root", name, self.most, self.least), self._item_rule(name)]) + "\n"

    def value_schema(self) -> dict:
        return {"type": "array", "items": {"type": "integer" if self.numbers else "string",
                                           "enum": list(dict.fromkeys(self.items))},
                "minItems": self.least, "maxItems": self.most}

    def json_schema(self) -> dict:
        return _object_schema(self.key, self.value_schema())

    def read_value(self, value: Any) -> str:
        allowed = set(self.items)
        if not (isinstance(value, list) and self.least <= len(value) <= self.most
                and all(type(v) is type(self.items[0]) and v in allowed for v in value)):
            raise ValueError("not a list of the offered items")
        return "[" + ", ".join(_json_item(v) for v in value) + "]"

    def read_json(self, text: str) -> str:
        return self.read_value(_member(text, self.key))


@dataclass(frozen=True)
class JsonObject:
    """A JSON object with every one of ``fields`` in order, each a ``JsonList``:
    ``{"3": ["a", "b"], "12": ["c"]}``. As JSON: the same object."""

    fields: tuple[tuple[str, JsonList], ...]

    def __post_init__(self) -> None:
        fields = tuple((str(k), v) for k, v in self.fields)
        if not fields or not all(isinstance(v, JsonList) for _, v in fields):
            raise ValueError("a JSON object needs fields, each a JsonList")
        if len({k for k, _ in fields}) != len(fields):
            raise ValueError("a JSON object's field names are distinct")
        object.__setattr__(self, "fields", fields)

    what = "a JSON object of lists"
    schema_name = "object"

    def gbnf(self) -> str:
        # rule names: the field name when it is plain letters and digits (page ids), else its position
        names = [k if re.fullmatch(r"[A-Za-z0-9]+", k) else f"-{n}" for n, (k, _) in enumerate(self.fields)]
        members = ' ", " '.join(f"{_gbnf_text(_json_item(k) + ': ')} l{name}"
                                for (k, _), name in zip(self.fields, names))
        rules = [f'root ::= "{{" {members} "}}"']
        for (_, field), name in zip(self.fields, names):
            rules.append(_list_rule(f"l{name}", f"k{name}", field.most, field.least))
            rules.append(field._item_rule(f"k{name}"))
        return "\n".join(rules) + "\n"

    def json_schema(self) -> dict:
        return {"type": "object", "additionalProperties": False, "required": [k for k, _ in self.fields],
                "properties": {k: field.value_schema() for k, field in self.fields}}

    def read_json(self, text: str) -> str:
        data = json.loads(text)
        if not isinstance(data, dict) or set(data) != {k for k, _ in self.fields}:
            raise ValueError("not an object of the offered fields")
        return "{" + ", ".join(f"{_json_item(k)}: {field.read_value(data[k])}" for k, field in self.fields) + "}"


@dataclass(frozen=True)
class Phrase:
    """``prefix`` + ``least``..``most`` characters of the class ``chars`` + ``suffix``; ``chars`` is the body of a
    character class both GBNF and regular expressions read alike (letters, digits, ranges, plain punctuation).
    As JSON: ``{key: "the characters"}`` (read back with the prefix and suffix)."""

    chars: str
    least: int
    most: int
    prefix: str = ""
    suffix: str = ""
    key: str = "text"

    def __post_init__(self) -> None:
        if not self.chars or re.search(r"[\]\\^\[\"]", self.chars):
            raise ValueError("a phrase's characters are a plain class body: no ] [ \\ ^ or quote")
        if not 0 <= self.least <= self.most:
            raise ValueError("a phrase needs 0 <= least <= most")

    schema_name = "text"

    @property
    def what(self) -> str:
        return f"a {self.key} of {self.least} to {self.most} characters"

    def gbnf(self) -> str:
        parts = ([_gbnf_text(self.prefix)] if self.prefix else []) + [f"[{self.chars}]{{{self.least},{self.most}}}"]
        parts += [_gbnf_text(self.suffix)] if self.suffix else []
        return "root ::= " + " ".join(parts) + "\n"

    def json_schema(self) -> dict:
        return _object_schema(self.key, {"type": "string", "pattern": f"^[{self.chars}]{{{self.least},{self.most}}}$"})

    def read_json(self, text: str) -> str:
        value = _member(text, self.key)
        if not isinstance(value, str) or not re.fullmatch(f"[{self.chars}]{{{self.least},{self.most}}}", value):
            raise ValueError("not a phrase of the allowed characters")
        return self.prefix + value + self.suffix


Constraint = Union[RecallChoice, OneOf, JsonList, JsonObject, Phrase]
CONSTRAINT_TYPES = (RecallChoice, OneOf, JsonList, JsonObject, Phrase)


def expresses(backend: Any, constraint: Constraint) -> bool:
    """Whether ``backend`` (a ``base.ChatBackend``) can hold its output to ``constraint``: its own
    ``ChatBackend.expresses``, yes unless it says otherwise (the llama.cpp backend renders every constraint)."""
    return bool(backend.expresses(constraint))


__all__ = ["CONSTRAINT_TYPES", "Constraint", "JsonList", "JsonObject", "OneOf", "Phrase", "RECALL_PREFIX",
           "RecallChoice", "expresses", "recall_call"]
