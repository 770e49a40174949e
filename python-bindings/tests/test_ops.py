"""Every op of the tracer's table, traced, compiled and checked against the
same core run by PyTorch: outputs and input gradients."""

import math
import re

import pytest
import torch
import torch.nn.functional as F

import flexsn
from flexsn import _capi, _compiled, _program
from conftest import assert_close

# name -> f(x, y) with x, y one step of two inputs; y is kept away from 0
# where the op divides by it, and x inside the domain where it needs one.
OPS = {
    "add": lambda x, y: x + y, "add_alpha": lambda x, y: torch.add(x, y, alpha=2),
    "add_scalar": lambda x, y: x + 1.5, "sub": lambda x, y: x - y,
    "sub_alpha": lambda x, y: torch.sub(x, y, alpha=0.5), "rsub": lambda x, y: 2. - x,
    "rsub_tensor": lambda x, y: torch.rsub(x, y), "mul": lambda x, y: x * y,
    "mul_scalar": lambda x, y: x * 3, "div": lambda x, y: x / y,
    "div_scalar": lambda x, y: x / 4, "div_trunc": lambda x, y: torch.div(x, y, rounding_mode="trunc"),
    "div_floor": lambda x, y: torch.div(x, y, rounding_mode="floor"),
    "neg": lambda x, y: -x, "reciprocal": lambda x, y: torch.reciprocal(y),
    "eq": lambda x, y: (x == y).to(x), "ne": lambda x, y: (x != 0.5).to(x),
    "ge": lambda x, y: (x >= y).to(x), "le": lambda x, y: (x <= 0.1).to(x),
    "gt": lambda x, y: (x > y).to(x), "lt": lambda x, y: (x < -0.2).to(x),
    "bitwise": lambda x, y: ((x > 0) & (y > 0) | ~(x > 1)).to(x),
    "logical": lambda x, y: torch.logical_or(torch.logical_and(x > 0, y > 0),
                                             torch.logical_not(x > 1)).to(x),
    "logical_float": lambda x, y: torch.logical_and(x, y).to(x),
    "sigmoid": lambda x, y: torch.sigmoid(x * 30), "tanh": lambda x, y: torch.tanh(x),
    "exp": lambda x, y: torch.exp(x), "log": lambda x, y: torch.log(y.abs()),
    "log2": lambda x, y: torch.log2(y.abs()), "log10": lambda x, y: torch.log10(y.abs()),
    "log1p": lambda x, y: torch.log1p(y.abs()), "expm1": lambda x, y: torch.expm1(x),
    "exp2": lambda x, y: torch.exp2(x), "sqrt": lambda x, y: torch.sqrt(y.abs()),
    "rsqrt": lambda x, y: torch.rsqrt(y.abs()), "abs": lambda x, y: torch.abs(x),
    "sin": lambda x, y: torch.sin(x), "cos": lambda x, y: torch.cos(x),
    "tan": lambda x, y: torch.tan(x * 0.5), "atan": lambda x, y: torch.atan(x),
    "asin": lambda x, y: torch.asin(torch.tanh(x) * 0.9),
    "acos": lambda x, y: torch.acos(torch.tanh(x) * 0.9),
    "sinh": lambda x, y: torch.sinh(x), "cosh": lambda x, y: torch.cosh(x),
    "erf": lambda x, y: torch.erf(x), "erfc": lambda x, y: torch.erfc(x),
    "floor": lambda x, y: torch.floor(x * 3), "ceil": lambda x, y: torch.ceil(x * 3),
    "round": lambda x, y: torch.round(x * 3), "trunc": lambda x, y: torch.trunc(x * 3),
    "frac": lambda x, y: torch.frac(x * 3), "relu": lambda x, y: torch.relu(x),
    "sign": lambda x, y: torch.sign(x), "sgn": lambda x, y: torch.sgn(x),
    "minimum": lambda x, y: torch.minimum(x, y), "maximum": lambda x, y: torch.maximum(x, y),
    "fmod": lambda x, y: torch.fmod(x * 3, 0.7), "fmod_tensor": lambda x, y: torch.fmod(x, y),
    "remainder": lambda x, y: torch.remainder(x * 3, 0.7),
    "pow2": lambda x, y: x ** 2, "pow3": lambda x, y: torch.pow(x, 3),
    "pow_half": lambda x, y: y.abs() ** 0.5, "pow_float": lambda x, y: y.abs() ** 1.7,
    "pow_tensor": lambda x, y: torch.pow(y.abs(), x), "pow_scalar_base": lambda x, y: 2. ** x,
    "square": lambda x, y: torch.square(x),
    "clamp": lambda x, y: torch.clamp(x, -0.5, 0.5), "clamp_min": lambda x, y: torch.clamp_min(x, 0.1),
    "clamp_max": lambda x, y: torch.clamp_max(x, 0.3),
    "clamp_tensor": lambda x, y: torch.clamp(x, min=-y.abs(), max=y.abs()),
    "where": lambda x, y: torch.where(x > 0, x, y),
    "where_scalar": lambda x, y: torch.where(x > 0, x, 0.25),
    "masked_fill": lambda x, y: x.masked_fill(y > 0.5, 2.0),
    "masked_fill_tensor": lambda x, y: x.masked_fill(y > 0.5, torch.tensor(-1.0)),
    "clone_detach": lambda x, y: x.clone() + y.detach(),
    "zeros_ones_like": lambda x, y: x + torch.zeros_like(x) * torch.ones_like(y) + torch.ones_like(x),
    "full_like": lambda x, y: x * torch.full_like(x, 3.0),
    "to_copy": lambda x, y: (x > 0).to(torch.float32) * y,
    "scalar_tensor": lambda x, y: x * torch.tensor(2.5),
    "atan2": lambda x, y: torch.atan2(x, y), "hypot": lambda x, y: torch.hypot(x, y),
    "lerp": lambda x, y: torch.lerp(x, y, 0.3), "lerp_tensor": lambda x, y: torch.lerp(x, y, torch.sigmoid(x)),
    "addcmul": lambda x, y: torch.addcmul(x, x, y, value=0.5),
    "addcdiv": lambda x, y: torch.addcdiv(x, x, y, value=0.5),
    "copysign": lambda x, y: torch.copysign(x, y), "heaviside": lambda x, y: torch.heaviside(x, y),
    "softplus": lambda x, y: F.softplus(x * 10, beta=0.5, threshold=5),
    "leaky_relu": lambda x, y: F.leaky_relu(x, 0.1), "hardtanh": lambda x, y: F.hardtanh(x, -0.3, 0.4),
    "elu": lambda x, y: F.elu(x, 0.7), "silu": lambda x, y: F.silu(x * 10),
    "gelu": lambda x, y: F.gelu(x), "gelu_tanh": lambda x, y: F.gelu(x, approximate="tanh"),
    "logsigmoid": lambda x, y: F.logsigmoid(x * 30),
    "fmin_fmax": lambda x, y: torch.fmax(torch.fmin(x, y), -x),
    "asinh_acosh_atanh": lambda x, y: torch.asinh(x) + torch.acosh(1 + y.abs()) + torch.atanh(torch.tanh(x) * .5),
}


def _core(op):
    def core(x, y, v):
        o = op(x, y)
        return o, v + o
    return core


@pytest.mark.parametrize("name", sorted(OPS))
def test_op(name, device):
    op = OPS[name]
    k = flexsn.FlexSNKernel(_core(op), 2, 1, backend=device.type, strict=True)
    r = flexsn.FlexSNKernel(_core(op), 2, 1, backend="torch")
    torch.manual_seed(abs(hash(name)) % 1000)
    x = torch.randn(3, 64, device=device)
    y = torch.randn(3, 64, device=device)
    y = torch.where(y.abs() < 0.1, torch.full_like(y, 0.3), y)
    v = torch.zeros(64, device=device)
    xs = [x.clone().requires_grad_(), x.clone().requires_grad_()]
    ys = [y.clone().requires_grad_(), y.clone().requires_grad_()]
    oc, vc = k(xs[0], ys[0], v)
    orf, vr = r(xs[1], ys[1], v)
    tol = 1e-5 * (1 + orf.abs().max().item())
    assert (oc - orf).abs().max().item() <= tol, name
    assert oc.requires_grad == orf.requires_grad, f"{name}: requires_grad"
    if not orf.requires_grad:
        return
    g = torch.randn_like(orf)
    (oc * g).sum().backward()
    try:
        (orf * g).sum().backward()
    except RuntimeError as e:  # heaviside: PyTorch has no derivative
        assert "not implemented" in str(e)
        return
    for a, b, what in ((xs[0].grad, xs[1].grad, "x"), (ys[0].grad, ys[1].grad, "y")):
        if b is None:
            assert a is None or (a == 0).all(), f"{name}: grad {what}"
            continue
        gtol = 1e-4 * (1 + b.abs().max().item())
        assert (a - b).abs().max().item() <= gtol, f"{name}: grad {what}"


def test_table_covers_spikingjelly_ops():
    from flexsn import _compiled, _optable
    names = set(_optable.supported_ops())
    required = """add.Tensor add.Scalar sub.Tensor sub.Scalar rsub.Scalar mul.Tensor
    mul.Scalar div.Tensor div.Scalar bitwise_and.Tensor bitwise_or.Tensor
    bitwise_not.default logical_and.default logical_or.default logical_not.default
    eq.Tensor eq.Scalar ne.Tensor ne.Scalar ge.Tensor ge.Scalar le.Tensor le.Scalar
    gt.Tensor gt.Scalar lt.Tensor lt.Scalar reciprocal.default neg.default
    detach.default sigmoid.default tanh.default exp.default log.default log2.default
    sqrt.default rsqrt.default abs.default sin.default cos.default erf.default
    floor.default ceil.default round.default relu.default sign.default sgn.default
    minimum.default maximum.default fmod.Scalar fmod.Tensor pow.Tensor_Scalar
    pow.Tensor_Tensor clamp.default clamp_min.default clamp_max.default where.self
    masked_fill.Scalar masked_fill.Tensor clone.default zeros_like.default
    ones_like.default _to_copy.default scalar_tensor.default""".split()
    missing = [op for op in required if f"aten.{op}" not in names]
    assert not missing, missing


@pytest.mark.parametrize("name", ["sigmoid", "silu", "logsigmoid", "softplus", "tanh",
                                  "gelu", "gelu_tanh", "elu", "leaky_relu"])
def test_gradient_at_zero(name, device):
    """Smooth functions keep their derivative at exactly 0 (a kink in an
    overflow-safe rewrite would zero it)."""
    fns = {"sigmoid": torch.sigmoid, "silu": F.silu, "logsigmoid": F.logsigmoid,
           "softplus": F.softplus, "tanh": torch.tanh, "gelu": F.gelu,
           "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "elu": F.elu,
           "leaky_relu": F.leaky_relu}
    fn = fns[name]
    core = lambda x, v: (fn(x), v + fn(x))
    k = flexsn.FlexSNKernel(core, 1, 1, backend=device.type, strict=True)
    x = torch.tensor([[0.0, -0.0, 1e-30, -1e-30, 30.0, -30.0, 100.0, -100.0]],
                     device=device)
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    out, _ = k(xa, torch.zeros(8, device=device))
    out.sum().backward()
    fn(xb).sum().backward()
    assert_close(out, fn(x), what=name)
    assert torch.isfinite(xa.grad).all(), name
    assert_close(xa.grad, xb.grad, what=f"{name} gradient")


def test_sigmoid_divides_once_a_step(monkeypatch):
    """torch.sigmoid costs one reciprocal a step, in the forward and in the
    backward, which recomputes it (the reciprocal's adjoint is a product,
    not a second division). Its divisor, 1 + exp(-|x|), lies in [1, 2], so
    the reciprocal takes the IEEE fast path without the range test of
    rcp.rn.f32 (flexsn-bounded-reciprocal): in the PTX of every training
    entry, fast reciprocals and exponentials come one for one and no
    rcp.rn/div.rn is left. Emitting PTX needs no GPU."""
    monkeypatch.setenv("FLEXSN_CACHE_DIR", "off")
    cc = _compiled.CompiledCore(lambda x, v: (torch.sigmoid(x * v), v + torch.sigmoid(x * v)),
                              1, 1)
    ir = cc.ir([torch.float32] * 2, [], [], [True, True])
    program = _program._compile(ir, "cuda", "chip=sm_90 differentiate=1")
    ptx = _capi.program_ptx(program.handle)
    entries = re.findall(r"\.entry (\w+)\((.*?)\n}\n", ptx, re.S)
    assert {name for name, _ in entries} >= {"core_forward", "core_backward",
                                             "core_backward_scalar"}
    for name, body in entries:
        exps = len(re.findall(r"\bex2\.approx", body))
        fast = len(re.findall(r"\brcp\.approx\.ftz\.f32", body))
        ieee = len(re.findall(r"\b(?:div|rcp)\.rn\.f32", body))
        assert exps > 0 and fast == exps and ieee == 0, (name, fast, ieee, exps)
