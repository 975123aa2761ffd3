"""The lab: synthetic data, the paging simulator, evaluation and benchmarks.

Generated conversations (with their phrasing sets), the simulator, the end-to-end evaluation with the real
model, metrics, reports and the latency bench. May import ``memory`` and every layer below it; nothing
below imports the lab.
"""
