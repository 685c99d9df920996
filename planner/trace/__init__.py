"""Profiler traces read back: each measured op beside its roofline, what-if on other devices, advice."""
