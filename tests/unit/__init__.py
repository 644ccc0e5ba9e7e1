"""Unit tests, a folder per wing of the harness (and frameworks/, tools/, the house's own rules): they start no process
(tests/unit/conftest.py refuses one) but those marked ``runs``; `make test-unit` runs the rest in a few minutes."""
