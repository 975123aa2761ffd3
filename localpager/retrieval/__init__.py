"""Retrieval: what to recall, and whether to.

The embedder (all-MiniLM-L6-v2 in numpy, ``bert``), the page index (vectors in SQLite, FAISS beside it),
the hybrid ranking of turns (dense and BM25 with priors), the recall gate and the reranking selector the
runtime asks. May import ``core``, ``backends``, ``store`` and ``runtime``.
"""
