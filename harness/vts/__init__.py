"""The VTS machinery: execution-rule checks, model and request mutations a driver must reject,
compilation-cache checks.
"""
