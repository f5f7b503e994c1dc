# SPDX-License-Identifier: BSD-3-Clause
"""Runs the Python package's pytest suite (ctest python_tests).

Exits 77 (ctest's skip) when this interpreter lacks numpy or pytest.
"""
import os
import sys

try:
    import numpy  # noqa: F401
    import pytest
except ImportError as e:
    print("python_tests: skipped (%s; apt-get install python3-numpy python3-pytest)" % e)
    sys.exit(77)

here = os.path.dirname(os.path.abspath(__file__))
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", here] + sys.argv[1:]))
