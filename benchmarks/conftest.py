"""Benchmark session set-up: compile (or load) the kernels once so no benchmark times compilation."""

import time

import pytest

import flowlib as fl


@pytest.fixture(scope="session", autouse=True)
def warm_kernels():
    tick = time.perf_counter()
    fl.warmup()
    return time.perf_counter() - tick
