"""The store: SQLite, cross-process locks, saved KV caches and conversation files.

Everything that persists: the SQLite store (the source of truth), the lock files that let many processes
share it, the saved llama.cpp caches beside it, and the readers of conversation files (JSONL, LoCoMo).
May import ``core`` and ``backends``.
"""
