"""Profiling: the GPM families per GPU and per MIG instance, and the MIG instances' memory (`families`)."""
