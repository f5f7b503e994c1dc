# SPDX-License-Identifier: BSD-3-Clause
"""PyTorch (1.13, eager) references of the mathematics in docs/math.md.

Each module builds the quantities the way a PyTorch user would (dense tensors,
plain autograd), so it serves as the oracle for Remora's goldens and as the
"same math in PyTorch eager" peer in the benchmarks.
"""
