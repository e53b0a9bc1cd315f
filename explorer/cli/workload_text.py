"""A library workload from text: ``--op``/``--shape``/``--param``, and ``op:shape``.

One parser for every command (and the benchmarks), so that ``explorer tune`` and
``explorer bench`` accept the same shapes and say the same about bad ones: each
error is a ``UsageError`` that names the text it is about and gives an example.
"""
from __future__ import annotations

from .. import ops
from ..errors import ExplorerError, UsageError
from .common import one_line

_TRUE, _FALSE = ("true", "yes", "on"), ("false", "no", "off")


def workload_from_text(op: str, shape: str | None = None, params=()):
    """The workload of ``--op``, ``--shape`` (None: the operator's defaults) and
    ``--param NAME=VALUE`` texts: ``workload_from_text("gemm", "64,64,64")``."""
    spec = op_spec(op, "--op")
    values = [] if shape is None else shape_values(spec, shape, f"--shape {shape!r}",
                                                   "--shape ")
    return build(op, values, param_values(params))


def workload_from_case(text: str):
    """The workload of an ``op:shape`` text such as ``"gemm:64,64,64"`` (all the shape
    values); a conv2d is padded by ``R // 2``, so that its output keeps its input's size."""
    op, _, shape = text.partition(":")
    where = f"case {text!r}"
    values = shape_values(op_spec(op, where), shape, where, f"{op}:")
    return build(op, values, {"padding": values[5] // 2} if op == "conv2d" else {})


def op_spec(name: str, where: str):
    """The registered operator ``name`` (an ``ops.OpSpec``); UsageError naming ``where``."""
    spec = ops.registry.get(name)
    if spec is None:
        raise UsageError(f"{where}: unknown operator {name!r}; use one of "
                         f"{', '.join(ops.registry)}")
    return spec


def shape_values(spec, text: str, where: str, example: str) -> list:
    """``text`` as one int per shape parameter of ``spec`` (the operator checks that each
    is positive); UsageError naming ``where``, with ``example`` and the default shape."""
    names = spec.param_names
    want = (f"{spec.name} takes {len(names)} shape values ({', '.join(names)}), e.g. "
            f"{example}{spec.example_shape}")
    items = [x.strip() for x in text.split(",")]
    if not text.strip() or "" in items:
        raise UsageError(f"{where} has an empty value: {want}")
    if len(items) != len(names):
        raise UsageError(f"{where} gives {len(items)} value{'s' * (len(items) > 1)}: {want}")
    return [_size(where, n, x, want) for n, x in zip(names, items)]


def _size(where: str, name: str, text: str, want: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise UsageError(f"{where}: {name}={text!r} is not a whole number: {want}") from None


def param_values(items) -> dict:
    """``NAME=VALUE`` texts (``--param``) as a dict; the operator checks the names."""
    kw = {}
    for item in items:
        k, sep, v = item.partition("=")
        if not sep or not k.strip() or not v.strip():
            raise UsageError(f"--param {item!r} must look like NAME=VALUE, e.g. --param "
                             "stride=2")
        if k.strip() in kw:
            raise UsageError(f"--param {k.strip()} is given twice: give it once")
        kw[k.strip()] = param_value(v)
    return kw


def param_value(text: str):
    """A ``--param`` value: true/false, an int, ints separated by commas (a pair such as
    padding=1,2), a float, else the text itself."""
    t = text.strip()
    if t.lower() in _TRUE + _FALSE:
        return t.lower() in _TRUE
    for cast in (int, float):
        try:
            return cast(t)
        except ValueError:
            pass
    if "," in t:
        try:
            return tuple(int(x) for x in t.split(","))
        except ValueError:
            pass
    return t


def build(name: str, shape: list, kw: dict):
    """``ops.get(name, *shape, **kw)``, its refusals as UsageError."""
    try:
        return ops.get(name, *shape, **kw)
    except ExplorerError as e:
        raise UsageError(one_line(e)) from None
    except (TypeError, ValueError, OverflowError) as e:  # a value of the wrong kind
        raise UsageError(f"{name}: {one_line(e)}: check --param and --shape") from None
