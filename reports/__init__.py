"""Turning result rows into CSV and HTML reports."""
