# SPDX-License-Identifier: BSD-3-Clause
"""Every public class and function of the package has a docstring, and so has every
public method of its classes."""
import inspect

import pytest

import remora
import remora.nn
import remora.optim
import remora.text
import remora.train

MODULES = [remora, remora.nn, remora.optim, remora.text, remora.train]


def public(obj):
    names = getattr(obj, "__all__", None) or [n for n in dir(obj) if not n.startswith("_")]
    for n in names:
        v = getattr(obj, n, None)
        if inspect.isclass(v) or callable(v):
            yield n, v


def undocumented():
    missing = []
    for m in MODULES:
        for name, v in public(m):
            if not (v.__doc__ or "").strip():
                missing.append(f"{m.__name__}.{name}")
            if inspect.isclass(v) and v.__module__.startswith("remora"):
                for mn, mv in vars(v).items():
                    if mn.startswith("_") or not callable(mv):
                        continue
                    if not (getattr(mv, "__doc__", "") or "").strip():
                        missing.append(f"{m.__name__}.{name}.{mn}")
    return sorted(set(missing))


def test_every_public_name_is_documented():
    assert undocumented() == []


def test_torch_bridge_is_documented():
    rt = pytest.importorskip("remora.torch")
    missing = [n for n, v in public(rt) if not (v.__doc__ or "").strip()]
    assert missing == []
