# SPDX-License-Identifier: BSD-3-Clause
"""Shared fixtures of the Python package's tests."""
import os

import pytest


@pytest.fixture
def source_dir():
    """The repository root (for data/ and tests/data/)."""
    return os.environ.get("REMORA_SOURCE_DIR",
                          os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
