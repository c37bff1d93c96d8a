"""Validation of the source papers' claims on the exact flow (one module per paper; issue 6 adds the runner)."""
