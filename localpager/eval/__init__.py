"""Measuring localpager: synthetic conversations with planted facts, and probes of recall."""
