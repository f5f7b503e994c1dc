# SPDX-License-Identifier: BSD-3-Clause
"""The op table (ops/ops.def) as Python functions and Tensor methods.

remora._C.op_table holds one tuple per row of the table, the row's C++ text:
(kind, name, raw attribute, line, params, method params, call, check). Each
row's overload is bound positionally as remora._C._ops.<name>_<line>; this
module writes a Python function with the row's parameter names and defaults
around it (and, for REMORA_METHOD / REMORA_UNARY rows, a Tensor method with
the method's parameters), so a new row of the table appears in Python with
no edit to the bindings. The docstrings are the rows' comments in ops.def.
"""
import keyword
import os
import re

from . import _C

_UNDEF = _C.Tensor()


def _opt_tensor(t):
    """None -> an undefined tensor (an absent optional tensor argument)."""
    return _UNDEF if t is None else t


def _shape(s):
    """A dims / shape argument: an int is a one-element list."""
    if isinstance(s, int):
        return [s]
    return s


def _reduction(r):
    """'mean' | 'sum' | 'none' (or a remora.Reduction) -> remora.Reduction."""
    if isinstance(r, str):
        return getattr(_C.Reduction, r)
    return r


def _split_top(text):
    """Splits 'a, b<c, d>, e' at the commas outside brackets."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "(<{[":
            depth += 1
        elif ch in ")>}]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


_NO_DEFAULT = object()


def _default(text):
    """A C++ default argument as a Python value; raises ValueError when unknown."""
    t = text.strip()
    if t in ("{}",):
        return ()
    if t == "true":
        return True
    if t == "false":
        return False
    if t in ("Tensor()", "std::nullopt", "nullptr"):
        return None
    m = re.fullmatch(r"Reduction::(\w+)", t)
    if m:
        return m.group(1)
    try:
        return int(t)
    except ValueError:
        pass
    try:
        return float(t)
    except ValueError:
        pass
    raise ValueError("default argument %r has no Python form" % t)


def _parse_params(text):
    """'(const Tensor& x, int64_t dim = -1)' -> [(type, name, default)]."""
    inner = text.strip()
    assert inner.startswith("(") and inner.endswith(")"), text
    inner = inner[1:-1].strip()
    out = []
    for p in _split_top(inner):
        decl, sep, dflt = p.partition("=")
        m = re.search(r"(\w+)\s*$", decl.strip())
        if not m:
            raise ValueError("parameter %r has no name" % p)
        name = m.group(1)
        ctype = decl.strip()[: m.start()].strip()
        if keyword.iskeyword(name):
            name += "_"
        out.append((ctype, name, _default(dflt) if sep else _NO_DEFAULT))
    return out


def _conversion(ctype, name, default, first=False):
    """The line converting a Python argument to what the C++ parameter takes (or None).

    None for a tensor parameter (other than the first) is an undefined tensor:
    the ops say where one is allowed, and raise remora.Error elsewhere.
    """
    if re.fullmatch(r"const Tensor\s*&", ctype) and (default is None or not first):
        return "%s = _UNDEF if %s is None else %s" % (name, name, name)
    if "Shape" in ctype:
        return "%s = _shape(%s)" % (name, name)
    if ctype == "Reduction":
        return "%s = _reduction(%s)" % (name, name)
    return None


def _signature(params, first=None):
    parts = [first] if first else []
    for _, name, default in params:
        parts.append(name if default is _NO_DEFAULT else "%s=%r" % (name, default))
    return ", ".join(parts)


def _docs(path):
    """{line: doc} for every line of every row of ops.def (its /// comment)."""
    docs = {}
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
    except OSError:
        return docs
    pending, i = [], 0
    while i < len(lines):
        s = lines[i].strip()
        if s.startswith("///"):
            pending.append(s[3:].strip())
            i += 1
            continue
        if re.match(r"REMORA_(FUNCTION|METHOD|UNARY)\(", s):
            start, depth = i, 0
            while True:
                depth += lines[i].count("(") - lines[i].count(")")
                if depth <= 0 or i + 1 >= len(lines):
                    break
                i += 1
            doc = "\n".join(x for x in pending if not x.startswith(("\\", "@")))
            for ln in range(start + 1, i + 2):  # 1-based line numbers
                docs[ln] = doc
        pending = []
        i += 1
    return docs


def _make(name, raw, sig, convs, args, doc, ns):
    body = "".join("    %s\n" % c for c in convs)
    src = "def %s(%s):\n    %r\n%s    return %s(%s)\n" % (name, sig, doc, body, raw, args)
    exec(src, ns)  # noqa: S102 - generated from the op table's C++ text
    return ns[name]


def _dispatcher(name, variants, doc):
    """One callable over several rows of one name: the first whose parameters bind."""
    import inspect

    sigs = [(inspect.signature(f), f) for f in variants]

    def op(*args, **kwargs):
        for sig, f in sigs:
            try:
                sig.bind(*args, **kwargs)
            except TypeError:
                continue
            return f(*args, **kwargs)
        raise TypeError("%s(): no form takes these arguments; forms: %s"
                        % (name, "; ".join(name + str(s) for s, _ in sigs)))

    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    return op


def build(table=None, docs_path=None):
    """Builds (functions, methods, skipped) from the op table.

    functions: {name: callable} for every function and method row;
    methods: {name: callable(self, ...)} for the REMORA_METHOD / REMORA_UNARY rows;
    skipped: {name: reason} for the rows without a Python form.
    """
    table = _C.op_table if table is None else table
    docs = _docs(docs_path or os.path.join(os.path.dirname(__file__), "ops.def"))
    ns = {"_UNDEF": _UNDEF, "_opt_tensor": _opt_tensor, "_shape": _shape, "_reduction": _reduction}
    funcs, meths, skipped = {}, {}, {}
    for kind, name, raw_attr, line, params, mparams, call, _check in table:
        if kind == "skipped":
            skipped[name] = raw_attr
            continue
        if kind == "declared_in":
            if not hasattr(_C, name):
                skipped[name] = "declared in %s with argument structs of its own; no Python form yet" % raw_attr
            continue
        raw = "_raw_" + raw_attr
        ns[raw] = getattr(_C._ops, raw_attr)
        try:
            ps = _parse_params(params)
        except ValueError as e:
            skipped[name] = str(e)
            continue
        header = "%s%s" % (name, params)
        doc = header + ("\n\n" + docs[line] if docs.get(line) else "")
        convs = [c for c in (_conversion(*p, first=(i == 0)) for i, p in enumerate(ps)) if c]
        fname = "%s__%d" % (name, line)
        f = _make(fname, raw, _signature(ps), convs, ", ".join(n for _, n, _ in ps), doc, ns)
        f.__name__ = f.__qualname__ = name
        funcs.setdefault(name, []).append(f)
        if kind != "method":
            continue
        try:
            mps = _parse_params(mparams)
        except ValueError:
            continue
        call_args = [a.strip() for a in call.strip()[1:-1].split(",") if a.strip()]
        names = {"self"} | {n for _, n, _ in mps}
        if not all(a in names for a in call_args):
            continue  # a call that is not a plain forwarding of the parameters
        mconvs = [c for c in (_conversion(*p) for p in mps) if c]
        m = _make("m_" + fname, raw, _signature(mps, "self"), mconvs, ", ".join(call_args),
                  "Tensor.%s%s: method form of %s\n\n%s" % (name, mparams, header, docs.get(line, "")), ns)
        m.__name__ = m.__qualname__ = name
        meths.setdefault(name, []).append(m)
    out_f = {n: (fs[0] if len(fs) == 1 else _dispatcher(n, fs, "\n\n".join(f.__doc__ for f in fs)))
             for n, fs in funcs.items()}
    out_m = {n: (ms[0] if len(ms) == 1 else _dispatcher(n, ms, "\n\n".join(m.__doc__ for m in ms)))
             for n, ms in meths.items()}
    return out_f, out_m, skipped


def install(namespace, tensor_class):
    """Puts the table's functions into namespace and its methods on tensor_class.

    A method the class already has (bound by hand in C++) is kept. Returns the
    skipped rows ({name: reason}).
    """
    funcs, meths, skipped = build()
    for name, f in funcs.items():
        namespace[name] = f
    for name, m in meths.items():
        if name not in tensor_class.__dict__:
            setattr(tensor_class, name, m)
    return skipped
