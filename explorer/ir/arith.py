"""Integer arithmetic: a linear canonical simplifier and interval bounds.

Index expressions produced by split and fuse are affine combinations of loop
variables with floor division and modulus by constants. ``simplify`` brings
them to a sum of terms (``atom * coefficient``), cancelling what cancels and
removing ``//`` and ``%`` whose operand range is known. ``int_bounds`` gives
constant bounds when every variable has a range; ``sym_bounds`` gives bounds
with some variables held fixed, which is what region analysis needs.
"""
from __future__ import annotations

from .expr import (Add, BinaryOp, BufferLoad, Call, Cast, CmpOp, Expr, FloatImm, FloorDiv,
                   FloorMod, IntImm, Max, Min, Mul, Not, Select, Sub, Var, And, Or, LT, LE,
                   EQ, NE, const)
from .functor import _keep, expr_children, expr_vars, rebuild_expr


class NonAffine(Exception):
    """Bounds of an expression cannot be derived (unknown variable, non-affine term)."""


# --------------------------------------------------------------- linear form

def _lin(e: Expr, ranges) -> tuple[dict, int]:
    """(terms: atom -> coefficient, constant) of ``e``. Without ranges the answer is kept
    on the node (callers only read the dict)."""
    if ranges and not _plain(e):    # ranges decide only //, %, min and max
        return _lin_ranged(e, ranges)
    out = getattr(e, "_lin", None)
    if out is None:
        if isinstance(e, Var):  # {e: 1} kept on e would be a reference cycle
            return {e: 1}, 0
        out = _lin_of(e, None)
        _keep(e, "_lin", out)
    return out


def _lin_ranged(e: Expr, ranges: dict) -> tuple[dict, int]:
    """``_lin_of(e, ranges)``, kept on the node per ranges of its own variables (all the
    answer depends on): a block's bindings, substituted into each of its indices, are
    taken apart with the same loop ranges once, not once per index."""
    memo, key = _memo_for(e, "_lin_ranged", ranges)
    out = memo.get(key)
    if out is None:
        out = _lin_of(e, ranges)
        for k in out[0]:
            if k is e:          # kept with e, a reference cycle: computed again instead
                return out
        memo[key] = out
    return out


def _memo_for(e: Expr, attr: str, ranges: dict) -> tuple:
    """(the dict kept on ``e`` under ``attr``, made on first use; the key in it of
    ``ranges``): the ranges (or None) of ``e``'s own variables in name order, all that
    an analysis of ``e`` under ``ranges`` depends on."""
    names = getattr(e, "_sorted_vars", None)
    if names is None:
        names = tuple(sorted(expr_vars(e)))
        _keep(e, "_sorted_vars", names)
    memo = getattr(e, attr, None)
    if memo is None:
        memo = {}
        _keep(e, attr, memo)
    return memo, tuple([ranges.get(n) for n in names])


def _lin_of(e: Expr, ranges) -> tuple[dict, int]:
    t = type(e)
    if t is Add or t is Sub or isinstance(e, (Add, Sub)):
        ta, ca = _lin(e.a, ranges)
        tb, cb = _lin(e.b, ranges)
        sign = 1 if isinstance(e, Add) else -1
        if not tb:          # forms hold no zero coefficients: the sum is ta as it is
            return ta, ca + sign * cb
        if not ta and sign == 1:
            return tb, ca + cb
        out = dict(ta)
        get = out.get
        cancelled = False
        for k, v in tb.items():
            v = get(k, 0) + sign * v
            out[k] = v
            if not v:
                cancelled = True
        if cancelled:
            out = {k: v for k, v in out.items() if v != 0}
        return out, ca + sign * cb
    if isinstance(e, IntImm):
        return {}, e.value
    if isinstance(e, Var):
        return {e: 1}, 0
    if isinstance(e, Mul):
        ta, ca = _lin(e.a, ranges)
        tb, cb = _lin(e.b, ranges)
        if not ta:
            return {k: v * ca for k, v in tb.items() if v * ca != 0}, cb * ca
        if not tb:
            return {k: v * cb for k, v in ta.items() if v * cb != 0}, ca * cb
        return {Mul(_from_lin(ta, ca), _from_lin(tb, cb)): 1}, 0
    if isinstance(e, (FloorDiv, FloorMod)):
        return _lin_divmod(e, ranges)
    if isinstance(e, (Min, Max)):
        a, b = simplify(e.a, ranges), simplify(e.b, ranges)
        pick = _decide_minmax(a, b, isinstance(e, Min), ranges)
        if pick is not None:
            return _lin(pick, ranges)
        return {type(e)(a, b): 1}, 0
    return {_simplify_generic(e, ranges): 1}, 0


def linear_terms(e: Expr, scale: int, coefs: dict, atoms: list) -> int:
    """Add ``scale * e`` to ``coefs`` (variable name -> coefficient) and ``atoms``
    ((coefficient, subexpression) for what is not a sum of constant multiples of
    variables); return its constant part. Unlike the bounds analysis above it
    needs no ranges and keeps ``//``, ``%``, ``min`` and ``max`` whole."""
    if isinstance(e, IntImm):
        return scale * e.value
    if isinstance(e, Var):
        coefs[e.name] = coefs.get(e.name, 0) + scale
        return 0
    if isinstance(e, (Add, Sub)):
        return linear_terms(e.a, scale, coefs, atoms) + \
            linear_terms(e.b, scale if isinstance(e, Add) else -scale, coefs, atoms)
    if isinstance(e, Mul) and isinstance(e.b, IntImm):
        return linear_terms(e.a, scale * e.b.value, coefs, atoms)
    if isinstance(e, Mul) and isinstance(e.a, IntImm):
        return linear_terms(e.b, scale * e.a.value, coefs, atoms)
    atoms.append((scale, e))
    return 0


def _decide_minmax(a: Expr, b: Expr, is_min: bool, ranges):
    d = simplify(a - b, ranges)
    if isinstance(d, IntImm):
        lo = hi = d.value
    else:
        try:
            lo, hi = int_bounds(d, ranges or {})
        except NonAffine:
            return None
    if hi <= 0:
        return a if is_min else b
    if lo >= 0:
        return b if is_min else a
    return None


def _lin_divmod(e, ranges):
    ta, ca = _lin(e.a, ranges)
    tb, cb = _lin(e.b, ranges)
    if tb or cb <= 0:
        return {type(e)(_from_lin(ta, ca), _from_lin(tb, cb)): 1}, 0
    c = cb
    if c == 1:
        return (ta, ca) if isinstance(e, FloorDiv) else ({}, 0)
    div_terms = {k: v // c for k, v in ta.items() if v % c == 0}
    rest = {k: v for k, v in ta.items() if v % c != 0}
    q, r = divmod(ca, c)
    rest_expr = _from_lin(rest, r)
    known = None
    if not rest:
        known = (r // c, r // c)
    else:
        try:
            lo, hi = int_bounds(rest_expr, ranges or {})
            if lo // c == hi // c:
                known = (lo // c, hi // c)
        except NonAffine:
            pass
    if isinstance(e, FloorDiv):
        if known is not None:
            return div_terms, q + known[0]
        out = dict(div_terms)
        out[FloorDiv(rest_expr, const(c))] = 1
        return out, q
    if known is not None:
        return rest, r - known[0] * c
    return {FloorMod(rest_expr, const(c)): 1}, 0


def _from_lin(terms: dict, c: int) -> Expr:
    out: Expr | None = None
    neg = None          # negative terms, appended after the positive ones
    lone = True         # out is still a single atom with coefficient 1 (or nothing)
    atoms = True        # every key is an atom whose own form is {key: 1}
    zero = False
    for k, v in terms.items():
        if type(k) not in _ATOMS:
            atoms = False
        if v > 0:
            if v == 1:
                t = k
            else:
                t, lone = Mul(k, const(v)), False
            if out is None:
                out = t
            else:
                out, lone = Add(out, t), False
        elif v < 0:
            if neg is None:
                neg = []
            neg.append((k, v))
        else:
            zero = True
    if neg is not None:
        lone = False
        for k, v in neg:
            out = Sub(const(0) if out is None else out, k if v == -1 else Mul(k, const(-v)))
    if out is None:
        return const(c)
    if c:
        lone = False
        out = Add(out, const(c)) if c > 0 else Sub(out, const(-c))
    if atoms and not lone and type(out) in _BUILT:
        # the linear form of what was just built, as _lin would find it again (positive
        # terms first, then negative ones): simplifying it or an expression around it
        # (a split's binding, substituted into by the next split) stops here
        if neg is None and not zero:
            lin = dict(terms)
        else:
            lin = {k: v for k, v in terms.items() if v > 0}
            lin.update(neg or ())
        _keep(out, "_lin", (lin, c))
        # its variables are its terms' (a walk down the new chain would find just those)
        _keep(out, "_vars", frozenset().union(*[expr_vars(k) for k in lin]))
        # and it is its own simplified form (_from_lin of that form builds it again): a
        # binding simplified again after a primitive that left it alone stays the node
        _keep(out, "_simple", _SAME)
    return out


_BUILT = (Add, Sub, Mul)    # what _from_lin makes, unless it returns a lone atom as it is
_ATOMS = (Var, Mul, FloorDiv, FloorMod, Min, Max)   # keys whose own form is {key: 1}


_INT_ARITH = (IntImm, Var, Add, Sub, Mul, FloorDiv, FloorMod, Min, Max)


def simplify(e: Expr, ranges: dict | None = None) -> Expr:
    """Canonical simplification. ``ranges`` maps var names to (lo, hi) inclusive.
    Without ranges the result is kept on the (immutable) node: a function's bindings
    are simplified again after every primitive that rebuilds the blocks around them."""
    if not ranges or _plain(e):
        out = getattr(e, "_simple", None)
        if out is None:
            out = _simplify(e, None)
            # a canonical node is its own answer: kept as _SAME, not as a reference cycle
            # that only the cycle collector's passes would free
            _keep(e, "_simple", _SAME if out is e else out)
        elif out is _SAME:
            return e
        return out
    return _simplify(e, ranges)


_SAME = object()   # an analysis of a node whose answer is the node itself


def _plain(e: Expr) -> bool:
    """Only int32 +, -, *, variables and constants: ranges cannot change its simplified
    form (they only decide //, %, min, max and comparisons). Kept on the node."""
    out = getattr(e, "_plain", None)
    if out is None:
        if isinstance(e, (IntImm, Var)):
            out = e.dtype == "int32"
        elif isinstance(e, (Add, Sub, Mul)):   # plain operands are int32, and so is e
            out = _plain(e.a) and _plain(e.b)
        else:
            out = False
        _keep(e, "_plain", out)
    return out


def linear_form(e: Expr) -> tuple[dict, int]:
    """(atom -> coefficient, constant) of ``e`` as ``simplify`` sees it (no ranges);
    shared: do not change the dict."""
    return _lin(e, None)


def lin_diff(a: Expr, b: Expr) -> tuple[dict, int]:
    """``_lin(Sub(a, b))`` (no ranges) without building the node: ``simplify(a - b)`` is
    ``_from_lin(*lin_diff(a, b))``, a constant exactly when the terms are empty."""
    ta, ca = _lin(a, None)
    tb, cb = _lin(b, None)
    out = dict(ta)
    for k, v in tb.items():
        out[k] = out.get(k, 0) - v
    return {k: v for k, v in out.items() if v != 0}, ca - cb


def from_lin(terms: dict, c: int) -> Expr:
    """The canonical expression of a linear form (what ``simplify`` returns)."""
    return _from_lin(terms, c)


def _simplify(e: Expr, ranges) -> Expr:
    if isinstance(e, _INT_ARITH) and e.dtype == "int32":
        terms, c = _lin(e, ranges)
        return _from_lin(terms, c)
    return _simplify_generic(e, ranges)


def _simplify_generic(e: Expr, ranges) -> Expr:
    kids = expr_children(e)
    if kids:
        new = tuple(simplify(k, ranges) for k in kids)
        if any(a is not b for a, b in zip(new, kids)):
            e = rebuild_expr(e, new)
    if isinstance(e, CmpOp):
        return _fold_cmp(e, ranges)
    if isinstance(e, Select) and isinstance(e.cond, IntImm):
        return e.true_value if e.cond.value else e.false_value
    if isinstance(e, BinaryOp) and isinstance(e.a, FloatImm) and isinstance(e.b, FloatImm):
        return _fold_float(e)
    return e


def _fold_float(e: BinaryOp) -> Expr:
    a, b = e.a.value, e.b.value
    ops = {"Add": a + b, "Sub": a - b, "Mul": a * b, "Min": min(a, b), "Max": max(a, b)}
    name = type(e).__name__
    if name in ops:
        return FloatImm(ops[name], e.a.dtype)
    return e


def _fold_cmp(e: CmpOp, ranges) -> Expr:
    if isinstance(e, And):
        if isinstance(e.a, IntImm):
            return e.b if e.a.value else const(False)
        if isinstance(e.b, IntImm):
            return e.a if e.b.value else const(False)
        return e
    if isinstance(e, Or):
        if isinstance(e.a, IntImm):
            return const(True) if e.a.value else e.b
        if isinstance(e.b, IntImm):
            return const(True) if e.b.value else e.a
        return e
    if e.a.dtype != "int32" or e.b.dtype != "int32":
        return e
    d = simplify(Sub(e.a, e.b), ranges)
    try:
        lo, hi = (d.value, d.value) if isinstance(d, IntImm) else int_bounds(d, ranges or {})
    except NonAffine:
        return e
    verdict = None
    if isinstance(e, LT):
        verdict = True if hi < 0 else False if lo >= 0 else None
    elif isinstance(e, LE):
        verdict = True if hi <= 0 else False if lo > 0 else None
    elif isinstance(e, EQ):
        verdict = True if lo == hi == 0 else False if (lo > 0 or hi < 0) else None
    elif isinstance(e, NE):
        verdict = False if lo == hi == 0 else True if (lo > 0 or hi < 0) else None
    return e if verdict is None else const(verdict)


# ------------------------------------------------------------------- bounds

def int_bounds(e: Expr, ranges: dict) -> tuple[int, int]:
    """Constant inclusive bounds of an integer expression; raises NonAffine."""
    if isinstance(e, IntImm):
        return e.value, e.value
    if isinstance(e, Var):
        if e.name not in ranges:
            raise NonAffine(e.name)
        return ranges[e.name]
    if isinstance(e, (Add, Sub, Mul, Min, Max)):
        a, b = int_bounds(e.a, ranges), int_bounds(e.b, ranges)
        if isinstance(e, Add):
            return a[0] + b[0], a[1] + b[1]
        if isinstance(e, Sub):
            return a[0] - b[1], a[1] - b[0]
        if isinstance(e, Min):
            return min(a[0], b[0]), min(a[1], b[1])
        if isinstance(e, Max):
            return max(a[0], b[0]), max(a[1], b[1])
        corners = [x * y for x in a for y in b]
        return min(corners), max(corners)
    if isinstance(e, (FloorDiv, FloorMod)):
        a, b = int_bounds(e.a, ranges), int_bounds(e.b, ranges)
        if b[0] != b[1] or b[0] <= 0:
            raise NonAffine("division by a non-constant")
        c = b[0]
        if isinstance(e, FloorDiv):
            return a[0] // c, a[1] // c
        if a[0] // c == a[1] // c:
            return a[0] % c, a[1] % c
        return 0, c - 1
    if isinstance(e, (CmpOp, Not)):
        return 0, 1
    if isinstance(e, Select):
        t, f = int_bounds(e.true_value, ranges), int_bounds(e.false_value, ranges)
        return min(t[0], f[0]), max(t[1], f[1])
    raise NonAffine(type(e).__name__)


def sym_bounds(e: Expr, ranged: dict) -> tuple[Expr, Expr]:
    """Bounds of ``e`` as ``ranged`` vars (name -> (lo, hi)) vary; others stay symbolic.
    Kept on the node per ranges of its own variables (all the answer depends on):
    lowering asks again for each place it tries to allocate a buffer."""
    memo, key = _memo_for(e, "_sym_bounds", ranged)
    out = memo.get(key)
    if out is None:
        try:
            lo, hi = _sym_bounds(e, ranged)
            # e itself kept as _SAME: a bound that is e would make a reference cycle
            out = (_SAME if lo is e else lo, _SAME if hi is e else hi)
        except NonAffine as err:
            out = NonAffine(*err.args)    # kept without its frames (no cycle)
        memo[key] = out
    if isinstance(out, NonAffine):
        raise NonAffine(*out.args)
    lo, hi = out
    return (e if lo is _SAME else lo, e if hi is _SAME else hi)


def _sym_bounds(e: Expr, ranged: dict) -> tuple[Expr, Expr]:
    terms, c = _lin(simplify(e, None), None)
    # the linear forms of c + sum(bound * coeff), summed as _lin sums that Add chain
    lo: dict = {}
    hi: dict = {}
    clo = chi = c
    for atom, coeff in terms.items():
        alo, ahi = _atom_bounds(atom, ranged)
        if coeff < 0:
            alo, ahi = ahi, alo
        clo += _add_scaled(lo, _lin(alo, None), coeff)
        chi += _add_scaled(hi, _lin(ahi, None), coeff)
    return _from_lin(lo, clo), _from_lin(hi, chi)


def _add_scaled(acc: dict, lin: tuple, coeff: int) -> int:
    """Turn ``acc`` (terms) into those of ``_lin(Add(a, Mul(b, const(coeff))))`` from
    ``_lin(a)`` and ``_lin(b)``, in place (a term that cancels goes, and comes back
    last, as there); returns what it adds to the constant."""
    tb, cb = lin
    for k, v in tb.items():
        v *= coeff
        if v:
            v += acc.get(k, 0)
            if v:
                acc[k] = v
            else:
                del acc[k]
    return cb * coeff


def _atom_bounds(atom: Expr, ranged: dict) -> tuple[Expr, Expr]:
    names = expr_vars(atom)
    if not names & ranged.keys():
        return atom, atom
    if isinstance(atom, Var):
        lo, hi = ranged[atom.name]
        return const(lo), const(hi)
    if isinstance(atom, (FloorDiv, FloorMod)) and isinstance(atom.b, IntImm):
        c = atom.b.value
        lo, hi = sym_bounds(atom.a, ranged)
        if isinstance(atom, FloorDiv):
            return simplify(FloorDiv(lo, atom.b)), simplify(FloorDiv(hi, atom.b))
        width = simplify(Sub(hi, lo))
        if isinstance(width, IntImm) and width.value < c:
            qlo, qhi = simplify(FloorDiv(lo, atom.b)), simplify(FloorDiv(hi, atom.b))
            if qlo == qhi:
                return simplify(FloorMod(lo, atom.b)), simplify(FloorMod(hi, atom.b))
        return const(0), const(c - 1)
    if isinstance(atom, (Min, Max)):
        a, b = sym_bounds(atom.a, ranged), sym_bounds(atom.b, ranged)
        f = Min if isinstance(atom, Min) else Max
        return simplify(f(a[0], b[0])), simplify(f(a[1], b[1]))
    if not names - ranged.keys():
        lo, hi = int_bounds(atom, ranged)
        return const(lo), const(hi)
    raise NonAffine(f"cannot bound {atom}")


def simplified_form(e: Expr, ranges: dict | None = None):
    """The linear form (atom -> coefficient, constant) of ``simplify(e, ranges)`` without
    building that expression; None where ``simplify`` would not take ``e`` apart (not
    int32 arithmetic). Shared: do not change the dict."""
    if isinstance(e, _INT_ARITH) and e.dtype == "int32":
        return _lin(e, ranges)
    return None


def form_coeff(form: tuple, var: str):
    """``linear_coeff(from_lin(*form), var)`` from the form's terms alone (each term of
    that chain contributes ``coefficient * linear_coeff(atom)``; None in any term makes
    the whole None)."""
    total = 0
    for atom, coeff in form[0].items():
        c = linear_coeff(atom, var)
        if c is None:
            return None
        total += coeff * c
    return total


def linear_coeff(e: Expr, var: str):
    """c such that ``e == base + c * var`` with ``base`` free of ``var``; None if not affine
    in ``var`` (used for strides of accesses and vector lanes)."""
    if isinstance(e, Var):
        return 1 if e.name == var else 0
    if isinstance(e, IntImm):
        return 0
    if isinstance(e, (Add, Sub)):
        a, b = linear_coeff(e.a, var), linear_coeff(e.b, var)
        if a is None or b is None:
            return None
        return a + b if isinstance(e, Add) else a - b
    if isinstance(e, Mul):
        a, b = linear_coeff(e.a, var), linear_coeff(e.b, var)
        if a is None or b is None:
            return None
        if a == 0 and b == 0:
            return 0
        if a == 0 and isinstance(e.a, IntImm):
            return e.a.value * b
        if b == 0 and isinstance(e.b, IntImm):
            return e.b.value * a
        return None
    return 0 if var not in expr_vars(e) else None
