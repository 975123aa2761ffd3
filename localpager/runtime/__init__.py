"""The runtime: one answer from a local model over a paged conversation.

The recall loop (``recall``) routes a question, held as one ``answering.Answering``, to its answer path: the
long-term layer's (``fact_answers``), a recall, or the chat's own prompt. Every prompt text and message is in
``prompts``, what the side context keeps read in ``prefixes``; the settings, the repetition guard, the GBNF
grammars, the model's side work (``assist``: keywords, eviction advice, worth) and the trace of a turn have a
room each. It asks a ``selector.PageSelector`` what to inject and never ranks itself. May import ``core`` and ``backends``.
"""
