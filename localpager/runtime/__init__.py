"""The runtime: one answer from a local model over a paged conversation.

The recall loop (``recall``), the answer prompts (``layouts``), the repetition guard, the GBNF grammars,
the model's side work (``assist``: keywords, eviction advice, worth) and the trace of a turn. It asks a
``PageSelector`` what to inject and never ranks itself. May import ``core`` and ``backends``.
"""
