"""Surrogate-gradient spike functions.

Each class is an ``nn.Module`` with SpikingJelly's name, arguments and
defaults. Called on a tensor it returns the Heaviside step ``(x >= 0)`` in
``x``'s dtype; its backward multiplies the incoming gradient by the
surrogate derivative ``g'(x)`` of its family. All of them go through one
custom op, ``torch.ops.flexsn.spike(x, kind, params)``, which a trace
records as one node and the compiler turns into ``flexsn.spike``.

The families and their derivatives are those of the ``flexsn`` dialect
(``#flexsn.surrogate<...>``, docs/generated/FlexSNDialect.md).
"""

from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import nn

# family name in the dialect, parameter names and defaults; the position in
# this list is the family's number (the dialect's SurrogateKind).
FAMILIES: list[tuple[str, str, tuple[tuple[str, float], ...]]] = [
    ("Sigmoid", "sigmoid", (("alpha", 4.0),)),
    ("ATan", "atan", (("alpha", 2.0),)),
    ("PiecewiseQuadratic", "piecewise_quadratic", (("alpha", 1.0),)),
    ("PiecewiseExp", "piecewise_exp", (("alpha", 1.0),)),
    ("SoftSign", "soft_sign", (("alpha", 2.0),)),
    ("SuperSpike", "super_spike", (("alpha", 1.0),)),
    ("Erf", "erf", (("alpha", 2.0),)),
    ("NonzeroSignLogAbs", "nonzero_sign_log_abs", (("alpha", 1.0),)),
    ("PiecewiseLeakyReLU", "piecewise_leaky_relu", (("w", 1.0), ("c", 0.01))),
    ("SquarewaveFourierSeries", "squarewave_fourier_series",
     (("n", 2), ("T_period", 8.0))),
    ("S2NN", "s2nn", (("alpha", 4.0), ("beta", 1.0))),
    ("QPseudoSpike", "q_pseudo_spike", (("alpha", 2.0),)),
    ("LeakyKReLU", "leaky_k_relu", (("leak", 0.0), ("k", 1.0))),
    ("FakeNumericalGradient", "fake_numerical_gradient", (("alpha", 0.3),)),
    ("LogTailedReLU", "log_tailed_relu", (("alpha", 0.0),)),
    ("Rect", "rect", (("alpha", 1.0),)),
]
KIND_OF_CLASS = {cls: i for i, (cls, _, _) in enumerate(FAMILIES)}


def derivative(kind: int, params: Sequence[float], x: torch.Tensor) -> torch.Tensor:
    """g'(x) of family `kind` with `params` (the dialect's formulas)."""
    p = params
    ax = x.abs()

    def sigmoid_grad(alpha):
        # alpha * e / (1 + e)^2 with e = exp(-|alpha x|), as the compiled
        # kernels compute it (sigmoid' is even; no 1 - s cancels).
        e = torch.exp(-abs(alpha) * ax)
        r = 1 / (1 + e)
        return alpha * (e * (r * r))

    if kind == 0:
        return sigmoid_grad(p[0])
    if kind == 1:
        return p[0] / 2 / (1 + (math.pi / 2 * p[0] * x) ** 2)
    if kind == 2:
        return torch.where(ax > 1 / p[0], torch.zeros_like(x), p[0] - p[0] ** 2 * ax)
    if kind == 3:
        return p[0] / 2 * torch.exp(-p[0] * ax)
    if kind == 4:
        return p[0] / 2 / (1 + (p[0] * x).abs()) ** 2
    if kind == 5:
        return p[0] / (1 + ax) ** 2
    if kind == 6:
        return p[0] / math.sqrt(math.pi) * torch.exp(-(p[0] * x) ** 2)
    if kind == 7:
        return 1 / (1 / p[0] + ax)
    if kind == 8:
        return torch.where(ax < p[0], torch.full_like(x, 1 / (2 * p[0])),
                           torch.full_like(x, p[1]))
    if kind == 9:
        w = 2 * math.pi / p[1]
        total = torch.zeros_like(x)
        for i in range(1, int(p[0])):
            total = total + torch.cos((2 * i - 1) * w * x)
        return 4 / p[1] * total
    if kind == 10:
        return torch.where(x < 0, sigmoid_grad(p[0]), p[1] / (x + 1))
    if kind == 11:
        return (1 + 2 / (p[0] - 1) * ax) ** (-p[0])
    if kind == 12:
        return torch.where(x >= 0, torch.full_like(x, p[1]), torch.full_like(x, p[0]))
    if kind == 13:
        sign = torch.where(x >= 0, torch.ones_like(x), -torch.ones_like(x))
        return torch.clamp(sign / x, max=p[0])
    if kind == 14:
        return torch.where(x <= 0, torch.full_like(x, p[0]),
                           torch.where(x <= 1, torch.ones_like(x), 1 / x))
    if kind == 15:
        return torch.where(ax < 0.5 / p[0], torch.full_like(x, p[0]),
                           torch.zeros_like(x))
    raise ValueError(f"unknown surrogate family {kind}")


# The op is defined through the low-level torch.library.Library API: unlike
# torch.library.custom_op, its calls do not import torch._dynamo (1-2 s), so
# eager use and tracing stay fast. It has a fake (meta) implementation and
# an autograd formula, so torch.compile keeps it as one node.
_lib = torch.library.Library("flexsn", "DEF")
_lib.define("spike(Tensor x, int kind, float[] params) -> Tensor")


def _spike_impl(x, kind, params):
    return (x >= 0).to(x.dtype)


_lib.impl("spike", _spike_impl, "CompositeExplicitAutograd")
torch.library.register_fake("flexsn::spike", lambda x, kind, params: torch.empty_like(x),
                            lib=_lib)


def _spike_setup(ctx, inputs, output):
    x, kind, params = inputs
    ctx.save_for_backward(x)
    ctx.kind, ctx.params = kind, params


def _spike_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    wide = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    g = derivative(ctx.kind, ctx.params, x.to(wide))
    return (grad * g).to(grad.dtype), None, None


torch.library.register_autograd("flexsn::spike", _spike_backward,
                                setup_context=_spike_setup, lib=_lib)


def spike(x: torch.Tensor, kind: int, params: list) -> torch.Tensor:
    """Heaviside step of `x` (1 where x >= 0; NaN gives 0) in x's dtype;
    its gradient is the surrogate derivative of family `kind`."""
    return torch.ops.flexsn.spike(x, kind, [float(p) for p in params])


class SurrogateFunction(nn.Module):
    """Base of the surrogate spike functions: a family and its parameters."""

    kind: int = -1

    def __init__(self, **params):
        super().__init__()
        names = FAMILIES[self.kind][2]
        self.params = tuple(float(params[name]) for name, _ in names)
        family = FAMILIES[self.kind][1]
        for (name, _), value in zip(names, self.params):
            if name in ("alpha", "w", "T_period") and family not in (
                    "log_tailed_relu",) and value <= 0:
                raise ValueError(f"{type(self).__name__}: {name} must be > 0, got {value}")
        if family == "q_pseudo_spike" and self.params[0] <= 1:
            raise ValueError(f"QPseudoSpike: alpha must be > 1, got {self.params[0]}")
        if family == "squarewave_fourier_series" and (
                self.params[0] < 1 or self.params[0] != int(self.params[0])):
            raise ValueError(f"SquarewaveFourierSeries: n must be an integer >= 1, "
                             f"got {params['n']}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return spike(x, self.kind, list(self.params))

    def extra_repr(self) -> str:
        return ", ".join(f"{n}={v:g}" for (n, _), v in zip(FAMILIES[self.kind][2], self.params))


def _spiking_only(name: str, spiking: bool) -> None:
    if not spiking:
        raise ValueError(f"{name}(spiking=False) is not supported: flexsn "
                         "surrogates always spike (Heaviside forward)")


def _make(kind: int):
    cls_name, family, names = FAMILIES[kind]
    defaults = dict(names)
    arg_list = ", ".join(f"{n}={defaults[n]!r}" for n, _ in names)
    doc = (f"Spike with the ``{family}`` surrogate gradient "
           f"(parameters: {arg_list}).")

    def __init__(self, *args, spiking: bool = True, **kwargs):
        _spiking_only(cls_name, spiking)
        if len(args) > len(names):
            raise TypeError(f"{cls_name} takes at most {len(names)} positional "
                            f"arguments ({', '.join(n for n, _ in names)})")
        params = dict(defaults)
        for (n, _), v in zip(names, args):
            params[n] = v
        for n, v in kwargs.items():
            if n not in defaults:
                raise TypeError(f"{cls_name} got an unexpected argument {n!r} "
                                f"(it takes {', '.join(defaults)})")
            params[n] = v
        SurrogateFunction.__init__(self, **params)

    return type(cls_name, (SurrogateFunction,),
                {"kind": kind, "__init__": __init__, "__doc__": doc,
                 "__module__": __name__})


Sigmoid = _make(0)
ATan = _make(1)
PiecewiseQuadratic = _make(2)
PiecewiseExp = _make(3)
SoftSign = _make(4)
SuperSpike = _make(5)
Erf = _make(6)
NonzeroSignLogAbs = _make(7)
PiecewiseLeakyReLU = _make(8)
SquarewaveFourierSeries = _make(9)
S2NN = _make(10)
QPseudoSpike = _make(11)
LeakyKReLU = _make(12)
FakeNumericalGradient = _make(13)
LogTailedReLU = _make(14)
Rect = _make(15)

__all__ = ["spike", "derivative", "SurrogateFunction"] + [c for c, _, _ in FAMILIES]


def ir_attribute(kind: int, params: Sequence[float]) -> str:
    """The dialect's spelling: ``<atan, alpha = 2.0>``."""
    family, names = FAMILIES[kind][1], FAMILIES[kind][2]
    parts = [family]
    for (name, _), value in zip(names, params):
        parts.append(f"{name} = {float_literal(float(value))}")
    return "<" + ", ".join(parts) + ">"


def float_literal(v: float) -> str:
    """`v` as an MLIR float literal (always with a '.'; finite values only)."""
    text = repr(v)
    if "." in text and "e" not in text:
        return text
    return f"{v:.17e}"
