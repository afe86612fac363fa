"""Verdicts: running one case through a driver (runner, partition), the accuracy criteria, the
outcome type and exit-status table, result rows, expected failures and attribution.
"""
