"""Hypothesis strategies for operation signatures, random graphs and operand data."""
