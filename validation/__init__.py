"""Validation of the source papers' claims on the exact flow (one module per paper; :mod:`.runner` runs them)."""
