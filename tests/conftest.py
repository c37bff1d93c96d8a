"""Shared fixtures: seeded generators, hypothesis profiles (no deadline: the first call may compile)."""

import numpy as np
import pytest
from hypothesis import settings

settings.register_profile("flowlib", deadline=None, print_blob=True)
settings.load_profile("flowlib")


@pytest.fixture
def rng():
    return np.random.default_rng(20261125)
