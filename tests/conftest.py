"""Shared fixtures: seeded generators, hypothesis profiles (no deadline: the first call may compile).

Under CI (``CI`` set) hypothesis is derandomized, so a green run stays green; locally every run explores new
examples (and keeps the failing ones in ``.hypothesis/``).
"""

import os

import numpy as np
import pytest
from hypothesis import settings

settings.register_profile("flowlib", deadline=None, print_blob=True)
settings.register_profile("ci", deadline=None, print_blob=True, derandomize=True, database=None)
settings.load_profile("ci" if os.environ.get("CI") else "flowlib")


@pytest.fixture
def rng():
    return np.random.default_rng(20261125)
