"""Command-line tests: real subprocesses of `python -m duraloop`."""
