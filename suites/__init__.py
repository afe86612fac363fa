"""Conformance and stress suites that a user runs against a driver (pytest files)."""
