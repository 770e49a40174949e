"""The op table: for each ATen op the tracer compiles, how it is written
with arith / math / flexsn ops on scalars (_ir.Body)."""

from __future__ import annotations

import math

import torch

from . import surrogate as _sg
from ._errors import UnsupportedOpError
from ._graph import STORAGE
from ._ir import Body, Value

aten = torch.ops.aten

def _pow(B: Body, a, e):
    if isinstance(e, (int, float)) and not isinstance(a, (int, float)):
        e = float(e)
        if e == 0.0:
            return B.const(1.0)
        if e == 1.0:
            return B.as_float(a)
        if e == 2.0:
            return B.mul(a, a)
        if e == 3.0:
            return B.mul(B.mul(a, a), a)
        if e == 0.5:
            return B.unary("math.sqrt", a)
        if e == -0.5:
            return B.unary("math.rsqrt", a)
        if e == -1.0:
            return B.div(1.0, a)
    return B.binary("math.powf", a, e)


def _neg_abs(B: Body, x):
    """-|x| as a select, not absf: its derivative at 0 is that of the x >= 0
    branch (-1), where absf's adjoint gives 0 and would zero the gradient of
    sigmoid(0) or logsigmoid(0)."""
    x = B.as_float(x)
    nonneg = B.cmp("oge", x, 0.0)
    return nonneg, B.select(nonneg, B.neg(x), x)


def _sigmoid(B: Body, x):
    # Stable both ways: exp(-|x|) never overflows, in the forward or in the
    # adjoint of the branch the select does not take. One division, shared
    # by both branches: r = 1 / (1 + e) is sigmoid(|x|), e * r is
    # sigmoid(-|x|); its adjoint adds none to the backward's recomputed r
    # (the reciprocal's adjoint is a product, see ArithAdjointModels.cpp).
    # The divisor lies in [1, 2], which the GPU lowering proves: the
    # reciprocal skips rcp.rn's slow-path test (flexsn-bounded-reciprocal).
    nonneg, z = _neg_abs(B, x)
    e = B.unary("math.exp", z)
    r = B.div(1.0, B.add(1.0, e))
    return B.select(nonneg, r, B.mul(e, r))


def _clamp_min(B, x, lo):
    return B.select(B.cmp("olt", x, lo), lo, x)


def _clamp_max(B, x, hi):
    return B.select(B.cmp("ogt", x, hi), hi, x)


def _clamp(B, x, lo, hi):
    if lo is not None:
        x = _clamp_min(B, x, lo)
    if hi is not None:
        x = _clamp_max(B, x, hi)
    return B.as_float(x)


def _softplus(B, x, beta=1.0, threshold=20.0):
    bx = B.mul(x, beta)
    big = B.cmp("ogt", bx, threshold)
    safe = B.select(big, threshold, bx)
    soft = B.div(B.unary("math.log1p", B.unary("math.exp", safe)), beta)
    return B.select(big, x, soft)


def _gelu(B, x, approximate="none"):
    x = B.as_float(x)
    if approximate == "tanh":
        inner = B.mul(math.sqrt(2.0 / math.pi),
                      B.add(x, B.mul(0.044715, B.mul(B.mul(x, x), x))))
        return B.mul(B.mul(0.5, x), B.add(1.0, B.unary("math.tanh", inner)))
    return B.mul(B.mul(0.5, x), B.add(1.0, B.unary("math.erf", B.mul(x, 1 / math.sqrt(2.0)))))


def _to_copy(B, x, dtype=None, **_):
    if dtype is None:
        return x
    if dtype == torch.bool:
        return B.as_bool(x)
    if dtype in (torch.float32, torch.float64):
        return B.as_float(x)
    if dtype in (torch.float16, torch.bfloat16):
        return B.round_to(x, STORAGE[dtype])
    raise UnsupportedOpError(f"conversion to {dtype} (only floating types and bool)")


def _bool_or_float(B, logic_op, float_op):
    def handler(a, b, *rest, **kw):
        if all(isinstance(v, Value) and v.kind == "b" for v in (a, b)):
            return B.logic(logic_op, a, b)
        return float_op(a, b, *rest, **kw)
    return handler


def _arithmetic_handlers(B: Body) -> dict:
    """Arithmetic, logic, comparisons, selects and clamps."""
    unary = B.unary

    def add(a, b, alpha=1):
        return B.add(a, b if alpha == 1 else B.mul(b, alpha))

    def sub(a, b, alpha=1):
        return B.sub(a, b if alpha == 1 else B.mul(b, alpha))

    def rsub(a, b, alpha=1):
        return B.sub(b, a if alpha == 1 else B.mul(a, alpha))

    def div_mode(a, b, rounding_mode=None):
        q = B.div(a, b)
        if rounding_mode == "trunc":
            return unary("math.trunc", q)
        if rounding_mode == "floor":
            return unary("math.floor", q)
        return q

    def remainder(a, b):
        return B.sub(a, B.mul(unary("math.floor", B.div(a, b)), b))

    def where(c, a, b):
        return B.select(c, a, b)

    def masked_fill(x, mask, value):
        return B.select(mask, value, x)

    def heaviside(x, v):
        return B.select(B.cmp("oeq", x, 0.0), v,
                        B.select(B.cmp("ogt", x, 0.0), 1.0, 0.0))

    def lerp(a, b, w):
        return B.add(a, B.mul(w, B.sub(b, a)))

    def addcmul(a, t1, t2, value=1):
        return B.add(a, B.mul(B.mul(t1, t2), value))

    def addcdiv(a, t1, t2, value=1):
        return B.add(a, B.mul(B.div(t1, t2), value))

    def cmp(pred):
        return lambda a, b: B.cmp(pred, a, b)

    mul_or_and = _bool_or_float(B, "andi", B.mul)

    add_or_or = _bool_or_float(B, "ori", add)

    return {
        aten.add.Tensor: add_or_or, aten.add.Scalar: add,
        aten.sub.Tensor: sub, aten.sub.Scalar: sub,
        aten.rsub.Tensor: rsub, aten.rsub.Scalar: rsub,
        aten.mul.Tensor: mul_or_and, aten.mul.Scalar: B.mul,
        aten.div.Tensor: B.div, aten.div.Scalar: B.div,
        aten.div.Tensor_mode: div_mode, aten.div.Scalar_mode: div_mode,
        aten.neg.default: B.neg, aten.reciprocal.default: lambda x: B.div(1.0, x),
        aten.bitwise_and.Tensor: lambda a, b: B.logic("andi", a, b),
        aten.bitwise_or.Tensor: lambda a, b: B.logic("ori", a, b),
        aten.bitwise_xor.Tensor: lambda a, b: B.logic("xori", a, b),
        aten.bitwise_not.default: B.lnot,
        aten.logical_and.default: lambda a, b: B.logic("andi", a, b),
        aten.logical_or.default: lambda a, b: B.logic("ori", a, b),
        aten.logical_xor.default: lambda a, b: B.logic("xori", a, b),
        aten.logical_not.default: B.lnot,
        aten.eq.Tensor: cmp("oeq"), aten.eq.Scalar: cmp("oeq"),
        aten.ne.Tensor: cmp("une"), aten.ne.Scalar: cmp("une"),
        aten.ge.Tensor: cmp("oge"), aten.ge.Scalar: cmp("oge"),
        aten.gt.Tensor: cmp("ogt"), aten.gt.Scalar: cmp("ogt"),
        aten.le.Tensor: cmp("ole"), aten.le.Scalar: cmp("ole"),
        aten.lt.Tensor: cmp("olt"), aten.lt.Scalar: cmp("olt"),
        aten.isnan.default: lambda x: B.cmp("uno", x, x),
        aten.minimum.default: lambda a, b: B.binary("arith.minimumf", a, b),
        aten.maximum.default: lambda a, b: B.binary("arith.maximumf", a, b),
        aten.fmin.default: lambda a, b: B.binary("arith.minnumf", a, b),
        aten.fmax.default: lambda a, b: B.binary("arith.maxnumf", a, b),
        aten.fmod.Scalar: lambda a, b: B.binary("arith.remf", a, b),
        aten.fmod.Tensor: lambda a, b: B.binary("arith.remf", a, b),
        aten.remainder.Scalar: remainder, aten.remainder.Tensor: remainder,
        aten.clamp.default: lambda x, lo=None, hi=None: _clamp(B, x, lo, hi),
        aten.clamp.Tensor: lambda x, lo=None, hi=None: _clamp(B, x, lo, hi),
        aten.clamp_min.default: lambda x, lo: _clamp(B, x, lo, None),
        aten.clamp_min.Tensor: lambda x, lo: _clamp(B, x, lo, None),
        aten.clamp_max.default: lambda x, hi: _clamp(B, x, None, hi),
        aten.clamp_max.Tensor: lambda x, hi: _clamp(B, x, None, hi),
        aten.hardtanh.default: lambda x, lo=-1.0, hi=1.0: _clamp(B, x, lo, hi),
        aten.where.self: where, aten.where.ScalarSelf: where,
        aten.where.ScalarOther: where, aten.where.Scalar: where,
        aten.masked_fill.Scalar: masked_fill, aten.masked_fill.Tensor: masked_fill,
        aten.heaviside.default: heaviside,
        aten.lerp.Scalar: lerp, aten.lerp.Tensor: lerp,
        aten.addcmul.default: addcmul, aten.addcdiv.default: addcdiv,
        aten.square.default: lambda x: B.mul(x, x),
    }


def _math_handlers(B: Body) -> dict:
    """Elementwise math functions, with the activations built from them."""
    as_float, unary = B.as_float, B.unary

    def elu(x, alpha=1.0, scale=1.0, input_scale=1.0):
        # expm1 of min(x, 0): the branch the select drops never overflows (its
        # adjoint would be 0 * inf).
        pos = B.cmp("ogt", x, 0.0)
        neg = B.mul(B.mul(scale, alpha),
                    unary("math.expm1", B.mul(B.select(pos, 0.0, x), input_scale)))
        return B.select(pos, B.mul(x, scale), neg)

    def hypot(a, b):
        return unary("math.sqrt", B.add(B.mul(a, a), B.mul(b, b)))

    def frac(x):
        return B.sub(x, unary("math.trunc", x))

    def math1(op):
        return lambda x: unary(op, x)

    def relu(x):
        return B.select(B.cmp("ugt", x, 0.0), x, 0.0)

    def sign(x):
        x = as_float(x)
        return B.select(B.cmp("ogt", x, 0.0), 1.0,
                        B.select(B.cmp("olt", x, 0.0), -1.0, x))

    def leaky_relu(x, slope=0.01):
        return B.select(B.cmp("ogt", x, 0.0), x, B.mul(x, slope))

    return {
        aten.sigmoid.default: lambda x: _sigmoid(B, x),
        aten.tanh.default: math1("math.tanh"),
        aten.exp.default: math1("math.exp"), aten.exp2.default: math1("math.exp2"),
        aten.expm1.default: math1("math.expm1"),
        aten.log.default: math1("math.log"), aten.log2.default: math1("math.log2"),
        aten.log10.default: math1("math.log10"), aten.log1p.default: math1("math.log1p"),
        aten.sqrt.default: math1("math.sqrt"), aten.rsqrt.default: math1("math.rsqrt"),
        aten.abs.default: math1("math.absf"),
        aten.sin.default: math1("math.sin"), aten.cos.default: math1("math.cos"),
        aten.tan.default: math1("math.tan"), aten.atan.default: math1("math.atan"),
        aten.asin.default: math1("math.asin"), aten.acos.default: math1("math.acos"),
        aten.sinh.default: math1("math.sinh"), aten.cosh.default: math1("math.cosh"),
        aten.asinh.default: math1("math.asinh"), aten.acosh.default: math1("math.acosh"),
        aten.atanh.default: math1("math.atanh"),
        aten.erf.default: math1("math.erf"), aten.erfc.default: math1("math.erfc"),
        aten.floor.default: math1("math.floor"), aten.ceil.default: math1("math.ceil"),
        aten.round.default: math1("math.roundeven"), aten.trunc.default: math1("math.trunc"),
        aten.frac.default: frac,
        aten.relu.default: relu, aten.sign.default: sign, aten.sgn.default: sign,
        aten.pow.Tensor_Scalar: lambda a, e: _pow(B, a, e),
        aten.pow.Tensor_Tensor: lambda a, e: B.binary("math.powf", a, e),
        aten.pow.Scalar: lambda a, e: B.binary("math.powf", a, e),
        aten.atan2.default: lambda a, b: B.binary("math.atan2", a, b),
        aten.copysign.Tensor: lambda a, b: B.binary("math.copysign", a, b),
        aten.copysign.Scalar: lambda a, b: B.binary("math.copysign", a, b),
        aten.hypot.default: hypot,
        aten.softplus.default: lambda x, beta=1.0, threshold=20.0: _softplus(B, x, beta, threshold),
        aten.leaky_relu.default: leaky_relu, aten.elu.default: elu,
        aten.silu.default: lambda x: B.mul(x, _sigmoid(B, x)),
        aten.gelu.default: lambda x, approximate="none": _gelu(B, x, approximate),
    }


def _shape_handlers(B: Body) -> dict:
    """Ops that only move, copy, make or mark a step's value (the scan owns
    the shapes), the spike op and dtype conversions."""
    as_float = B.as_float

    def const_like(v):
        return lambda *a, **k: B.const(v)

    def full_like(x, v, **_):
        return B.const(v)

    def detach(x):
        x = as_float(x)
        return B.emit(f"flexsn.detach {x.name} : {B.ft}", "f")

    def spike(x, kind, params):
        x = as_float(x)
        return B.emit(f"flexsn.spike {x.name} surrogate "
                      f"{_sg.ir_attribute(kind, params)} : {B.ft}", "f")

    def identity(x, *_, **__):
        return x

    def select(x, dim, index):
        # a trace's tensors hold one element: only index 0 (or -1) of a
        # dimension of size one exists; anything else picks another neuron
        if index not in (0, -1):
            raise UnsupportedOpError(f"select of index {index} mixes neurons")
        return x

    def stack1(tensors, dim=0):
        if len(tensors) != 1:
            raise UnsupportedOpError(f"stack/cat of {len(tensors)} tensors mixes neurons")
        return tensors[0]

    return {
        aten.clone.default: identity, aten.alias.default: identity,
        # shape-only ops (a step's values are per neuron; shapes are the
        # scan's): SpikingJelly's single steps run a T=1 sequence through them
        aten.unsqueeze.default: identity, aten.squeeze.default: identity,
        aten.squeeze.dim: identity, aten.squeeze.dims: identity,
        aten.view.default: identity, aten._unsafe_view.default: identity,
        aten.reshape.default: identity, aten.select.int: select,
        aten.stack.default: stack1, aten.cat.default: stack1,
        aten.lift_fresh_copy.default: identity, aten.lift_fresh.default: identity, aten.expand.default: identity,
        aten.detach.default: detach,
        aten.zeros_like.default: const_like(0.0), aten.ones_like.default: const_like(1.0),
        aten.full_like.default: full_like,
        aten.scalar_tensor.default: lambda v, **_: B.const(v),
        aten._to_copy.default: lambda x, **kw: _to_copy(B, x, **kw),
        torch.ops.flexsn.spike.default: spike,
    }


def handlers(B: Body) -> dict:
    """The op table: each ATen op the tracer compiles, and what it emits
    into `B`."""
    return {**_arithmetic_handlers(B), **_math_handlers(B), **_shape_handlers(B)}


MULTI = {aten.log_sigmoid_forward.default}


def out_of_place(op):
    """The out-of-place overload of an in-place ATen op (relu_ -> relu):
    the recorder maps the mutated tensor to the op's node, so the values
    the core reads after the op are its result."""
    name = getattr(getattr(op, "overloadpacket", None), "__name__", "")
    if not name.endswith("_") or name.startswith("_"):
        return None
    packet = getattr(aten, name[:-1], None)
    return getattr(packet, op._overloadname, None) if packet is not None else None


def table_logsigmoid(B: Body, x):
    # log sigmoid(x) = min(x, 0) - log1p(exp(-|x|)), with min and |x| as
    # selects on one predicate so that the derivative at 0 is 1/2.
    x = B.as_float(x)
    nonneg, z = _neg_abs(B, x)
    m = B.select(nonneg, 0.0, x)
    return B.sub(m, B.unary("math.log1p", B.unary("math.exp", z)))


def supported_ops() -> list[str]:
    """Names of the ATen ops the tracer compiles."""
    return sorted({str(k) for k in handlers(Body("f32"))} | {str(k) for k in MULTI})
