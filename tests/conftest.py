"""Test configuration. ``NBX_TEST_DEVICE`` picks the device the suite runs on (default: the CPU, through
Triton's interpreter); on a GPU machine ``NBX_TEST_DEVICE=cuda`` runs the same tests there."""
import os

import numpy as np
import pytest

import nbxtensor as nbx

TEST_DEVICE = os.environ.get("NBX_TEST_DEVICE", "cpu")


@pytest.fixture
def device():
    return TEST_DEVICE


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def to_nbx(array, device=TEST_DEVICE):
    """A tensor on the test device holding ``array``'s values (a copy)."""
    return nbx.tensor(np.asarray(array), device=device)
