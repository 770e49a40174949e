"""The user API: both SpikingJelly FlexSN APIs, surrogates, fallback and
strict mode, and the errors bad input gets."""

import math
import subprocess
import sys
import warnings

import pytest
import torch
from torch import nn

import flexsn
from flexsn import surrogate
from conftest import assert_close
from cores import lif, tutorial


# --- the tutorial's example ---------------------------------------------------

def test_tutorial_example_means(device):
    """The tutorial's neuron on [16, 3, 32, 32]: compiled equals torch, and
    the means are those of the same computation (the printed values of the
    tutorial came from another random stream)."""
    ex = tuple(torch.zeros(1, device=device) for _ in range(4))
    kw = dict(num_inputs=2, num_states=2, num_outputs=2, example_inputs=ex,
              requires_grad=(True,) * 4, step_mode="m", store_state_seqs=True)
    f = flexsn.FlexSN(tutorial(0.5, 0.9), backend="inductor", **kw)
    g = flexsn.FlexSN(tutorial(0.5, 0.9), backend="torch", **kw)
    torch.manual_seed(0)
    x = torch.randn([16, 3, 32, 32], device=device)
    y = torch.randn([16, 3, 32, 32], device=device)
    xi, yi, xt, yt = (t.clone().requires_grad_(True) for t in (x, y, x, y))
    s1i, s2i = f(xi, yi)
    s1t, s2t = g(xt, yt)
    grad = torch.randn_like(s1i)
    s1i.backward(grad)
    s1t.backward(grad)
    assert torch.allclose(s1i, s1t) and torch.allclose(s2i, s2t)
    assert torch.allclose(xi.grad, xt.grad, atol=1e-6, rtol=1e-6)
    assert torch.allclose(yi.grad, yt.grad, atol=1e-6, rtol=1e-6)
    assert torch.allclose(f.state_seqs[0], g.state_seqs[0], atol=1e-6, rtol=1e-6)
    assert torch.allclose(f.state_seqs[1], g.state_seqs[1])
    assert 0.05 < s1i.mean().item() < 0.12 and 0.1 < s2i.mean().item() < 0.2


# --- SpikingJelly 2.0's API ---------------------------------------------------

def test_sj2_static_inputs(device):
    tau = nn.Parameter(torch.tensor([2.0], device=device))
    v_th = torch.full((4, 5), 1.0, device=device)

    def core(x, v, tau, v_th):
        h = v + (x - v) / tau
        s = surrogate.Sigmoid()(h - v_th)
        return s, h * (1 - s)

    m = flexsn.FlexSN(core, num_states=1, static_inputs=(tau, v_th), store_state_seqs=True)
    assert m.num_inputs == 1 and m.num_outputs == 1 and m.compiled
    assert [n for n, _ in m.named_parameters()] == ["static_input_0"]
    assert [n for n, _ in m.named_buffers()] == ["static_input_1"]
    assert set(m.state_dict()) == {"static_input_0", "static_input_1"}
    r = flexsn.FlexSN(core, num_states=1, static_inputs=(tau, v_th), backend="torch")
    x = torch.randn(6, 4, 5, device=device) * 3
    out = m(x)
    out.sum().backward()
    g_c = tau.grad.clone()
    tau.grad = None
    assert_close(out, r(x))
    r.reset()
    r(x).sum().backward()
    assert_close(g_c, tau.grad, what="grad tau")


def test_sj2_positional_and_ambiguity():
    core = lif()
    m = flexsn.FlexSN(core, 1, ())            # 2.0: (core, num_states, static_inputs)
    assert m.num_inputs == 1 and m.num_states == 1
    with pytest.raises(TypeError, match="ambiguous"):
        flexsn.FlexSN(core, 1)
    m = flexsn.FlexSN(core, 1, 1, 1)          # tutorial: (core, ni, ns, no)
    assert (m.num_inputs, m.num_states, m.num_outputs) == (1, 1, 1)


def test_sj2_refuses_var_args():
    with pytest.raises(TypeError, match=r"\*args"):
        flexsn.FlexSN(lambda *a: a, num_states=1)


@pytest.mark.skipif("spikingjelly" not in sys.modules and
                    subprocess.run([sys.executable, "-c", "import spikingjelly"],
                                   capture_output=True).returncode != 0,
                    reason="spikingjelly is not installed")
def test_spikingjelly_surrogates_compile_unchanged(device):
    from spikingjelly.activation_based import surrogate as sj
    for cls, params in [(sj.ATan, {"alpha": 3.0}), (sj.Sigmoid, {}),
                        (sj.PiecewiseLeakyReLU, {"w": 0.5, "c": 0.1}),
                        (sj.SquarewaveFourierSeries, {"n": 3})]:
        fn = cls(**params)
        ours = getattr(surrogate, cls.__name__)(**params)
        k = flexsn.FlexSNKernel(lif(spike_fn=fn), 1, 1, backend=device.type, strict=True)
        r = flexsn.FlexSNKernel(lif(spike_fn=ours), 1, 1, backend="torch")
        x = (torch.randn(5, 32, device=device) * 2)
        xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
        v0 = torch.zeros(32, device=device)
        a, _ = k(xa, v0)
        b, _ = r(xb, v0)
        assert_close(a, b, what=cls.__name__)
        a.sum().backward()
        b.sum().backward()
        assert_close(xa.grad, xb.grad, what=f"{cls.__name__} grad")
    class Custom(sj.SurrogateFunctionBase):
        @staticmethod
        def spiking_function(x):
            return (x >= 0).to(x)

    with pytest.raises(flexsn.UnsupportedOpError, match="Custom has no flexsn.spike family"):
        flexsn.FlexSNKernel(lif(spike_fn=Custom()), 1, 1, strict=True)


# --- surrogates ---------------------------------------------------------------

@pytest.mark.parametrize("kind", range(16))
def test_surrogate_gradient_formula(kind):
    name, family, params = surrogate.FAMILIES[kind]
    fn = getattr(surrogate, name)()
    x = torch.linspace(-2.5, 2.5, 101, dtype=torch.float64).requires_grad_()
    y = fn(x)
    assert torch.equal(y, (x >= 0).double())
    y.backward(torch.ones_like(y))
    expect = surrogate.derivative(kind, fn.params, x.detach())
    assert torch.allclose(x.grad, expect), name
    # One point against the dialect's table, written out by hand.
    p = dict(params)
    x0 = 0.3
    formulas = {
        "sigmoid": lambda: p["alpha"] * (s := 1 / (1 + math.exp(-p["alpha"] * x0))) * (1 - s),
        "atan": lambda: p["alpha"] / 2 / (1 + (math.pi / 2 * p["alpha"] * x0) ** 2),
        "erf": lambda: p["alpha"] / math.sqrt(math.pi) * math.exp(-(p["alpha"] * x0) ** 2),
        "super_spike": lambda: p["alpha"] / (1 + abs(x0)) ** 2,
        "rect": lambda: p["alpha"] if abs(x0) < 0.5 / p["alpha"] else 0.0,
    }
    if family in formulas:
        got = surrogate.derivative(kind, fn.params, torch.tensor([x0], dtype=torch.float64))
        assert abs(got.item() - formulas[family]()) < 1e-12


@pytest.mark.parametrize("kind", range(16))
def test_every_surrogate_compiles(kind, device):
    name = surrogate.FAMILIES[kind][0]
    fn = getattr(surrogate, name)()
    k = flexsn.FlexSNKernel(lif(spike_fn=fn), 1, 1, backend=device.type, strict=True)
    r = flexsn.FlexSNKernel(lif(spike_fn=fn), 1, 1, backend="torch")
    x = torch.randn(4, 50, device=device) * 2
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    v0 = torch.zeros(50, device=device)
    a, _ = k(xa, v0)
    b, _ = r(xb, v0)
    a.sum().backward()
    b.sum().backward()
    assert_close(xa.grad, xb.grad, what=name)


def test_surrogate_arguments():
    assert surrogate.PiecewiseLeakyReLU(0.5).params == (0.5, 0.01)
    with pytest.raises(ValueError, match="alpha must be > 0"):
        surrogate.Sigmoid(alpha=-1)
    with pytest.raises(TypeError, match="unexpected argument 'beta'"):
        surrogate.ATan(beta=2)
    with pytest.raises(ValueError, match="spiking=False"):
        surrogate.ATan(spiking=False)


def test_hard_threshold_has_zero_gradient(device):
    def core(x, v):
        h = v + (x - v) / 2.0
        s = (h >= 1.0).to(h)
        return s, h * (1.0 - s)

    k = flexsn.FlexSNKernel(core, 1, 1, backend=device.type, strict=True)
    x = torch.randn(4, 8, device=device, requires_grad=True)
    s, v = k(x, torch.zeros(8, device=device))
    assert not s.requires_grad
    v.sum().backward()
    r = flexsn.FlexSNKernel(core, 1, 1, backend="torch")
    xr = x.detach().clone().requires_grad_()
    r(xr, torch.zeros(8, device=device))[1].sum().backward()
    assert_close(x.grad, xr.grad)


# --- unsupported ops ----------------------------------------------------------

def _matmul_core(x, v):
    h = v + x @ torch.ones(x.shape[-1], x.shape[-1], device=x.device) / 4
    return h, h


def test_unsupported_op_warns_and_falls_back():
    with pytest.warns(flexsn.FallbackWarning, match=r"aten\.(ones|mm)\S*, which flexsn cannot compile at .*test_api.py:\d+"):
        m = flexsn.FlexSN(_matmul_core, num_inputs=1, num_states=1, backend="cpu")
    assert not m.compiled
    x = torch.randn(3, 2, 4)
    r = flexsn.FlexSN(_matmul_core, num_inputs=1, num_states=1, backend="torch")
    assert_close(m(x), r(x))


def test_unsupported_op_strict_raises():
    with pytest.raises(flexsn.UnsupportedOpError, match=r"aten\.(ones|mm)"):
        flexsn.FlexSN(_matmul_core, num_inputs=1, num_states=1, strict=True)


# --- bad input ------------------------------------------------------------------

def test_bad_arguments():
    core = lif()
    with pytest.raises(ValueError, match="step_mode"):
        flexsn.FlexSN(core, num_inputs=1, num_states=1, step_mode="x")
    with pytest.raises(ValueError, match="backend"):
        flexsn.FlexSN(core, num_inputs=1, num_states=1, backend="trition")
    with pytest.raises(ValueError, match="requires_grad has 3 entries"):
        flexsn.FlexSN(core, num_inputs=1, num_states=1, requires_grad=(True,) * 3)
    with pytest.raises(ValueError, match="num_outputs=2"):
        flexsn.FlexSN(core, num_inputs=1, num_states=1, num_outputs=2)
    with pytest.raises(TypeError, match="callable"):
        flexsn.FlexSN(3, num_inputs=1, num_states=1)


def test_bad_inputs(device):
    m = flexsn.FlexSN(tutorial(), num_inputs=2, num_states=2, backend=device.type)
    x = torch.randn(4, 6, device=device)
    with pytest.raises(TypeError, match="expected 2 input"):
        m(x)
    with pytest.raises(ValueError, match="elements per step"):
        m(x, torch.randn(4, 7, device=device))
    m.reset()
    with pytest.raises(ValueError, match="T=4 steps"):
        m(x, torch.randn(5, 6, device=device))
    m.reset()
    with pytest.raises(TypeError, match="dtype"):
        m(x, torch.randn(4, 6, device=device, dtype=torch.float64))
    m.reset()
    with pytest.raises(TypeError, match="float32, float16, bfloat16"):
        m(x.long(), x.long())
    m.reset()
    with pytest.raises(TypeError, match="torch.Tensor"):
        m(x, 3.0)


def test_input_on_wrong_device():
    m = flexsn.FlexSN(lif(), num_inputs=1, num_states=1, backend="cuda")
    with pytest.raises(ValueError, match="backend 'cuda' runs CUDA tensors"):
        m(torch.randn(3, 4))


def test_core_returning_wrong_things():
    with pytest.raises(TypeError, match="return value #1 is float"):
        flexsn.FlexSN(lambda x, v: (x, 1.0), num_inputs=1, num_states=1)
    with pytest.raises(ValueError, match="returns 1 values but there are 2 states"):
        flexsn.FlexSN(lambda x, v, w: x, num_inputs=1, num_states=2)
    with pytest.raises(TypeError, match="bool tensor"):
        flexsn.FlexSN(lambda x, v: (x > v, v), num_inputs=1, num_states=1, strict=True)


def test_core_that_raises():
    def bad(x, v):
        raise RuntimeError("my core is broken")
    with pytest.raises(RuntimeError, match="my core is broken"):
        flexsn.FlexSN(bad, num_inputs=1, num_states=1)


def test_nan_and_inf_propagate(device):
    k = flexsn.FlexSNKernel(lif(), 1, 1, backend=device.type)
    r = flexsn.FlexSNKernel(lif(), 1, 1, backend="torch")
    x = torch.randn(3, 4, device=device)
    x[0, 0], x[1, 1], x[2, 2] = float("nan"), float("inf"), -float("inf")
    v0 = torch.zeros(4, device=device)
    a, va = k(x, v0)
    b, vb = r(x, v0)
    assert torch.equal(a.isnan(), b.isnan()) and torch.equal(va.isnan(), vb.isnan())
    assert torch.equal(a.nan_to_num(), b.nan_to_num())


def test_import_is_light():
    code = ("import sys, time; t = time.time(); import flexsn; "
            "dt = time.time() - t; assert 'torch' not in sys.modules; print(dt)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=str(__import__("pathlib").Path(__file__).parent.parent))
    assert out.returncode == 0, out.stderr
    assert float(out.stdout) < 0.5


def test_argument_given_twice():
    with pytest.raises(TypeError, match="num_states both positionally and by keyword"):
        flexsn.FlexSN(lif(), 1, 1, 1, num_states=1)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available() or
                    torch.cuda.get_device_properties(0).total_memory < 70 * 2**30,
                    reason="needs a GPU with 70 GiB")
def test_more_than_2_31_elements_on_the_gpu():
    """T * NCL > 2^31: offsets past 2^31 (64-bit indexing from Python through
    the C API into the kernel). Neurons are independent, so slices at both
    ends are checked against the torch loop."""
    T, ncl = 3, 750_000_000                      # 2.25e9 elements per sequence
    core = lif()
    k = flexsn.FlexSNKernel(core, 1, 1, backend="cuda")
    x = torch.empty(T, ncl, device="cuda").uniform_(-1, 3)
    v0 = torch.zeros(ncl, device="cuda")
    with torch.no_grad():
        s, v = k(x, v0)
    r = flexsn.FlexSNKernel(core, 1, 1, backend="torch")
    for part in (slice(0, 4096), slice(ncl - 4096, ncl)):
        rs, rv = r(x[:, part], v0[part])
        assert torch.equal(s[:, part], rs)
        assert_close(v[:, part], rv)
    del s, v
    # training: the backward's offsets too
    xg = x.requires_grad_()
    s, v = k(xg, v0)
    g = torch.ones(T, ncl, device="cuda")
    torch.autograd.backward([s], [g])
    for part in (slice(0, 2048), slice(ncl - 2048, ncl)):
        xr = x[:, part].detach().clone().requires_grad_()
        rs, rv = r(xr, v0[part])
        rs.sum().backward()
        assert_close(xg.grad[:, part], xr.grad, what="grad past 2^31")


def test_hostile_ranks_and_states(device):
    """Rank 0, states of the wrong size or dtype, non-tensors: each a clear
    error; rank 1 is T steps of one neuron; a user state that requires grad
    gets the torch loop's gradient."""
    m = flexsn.FlexSN(lif(), num_inputs=1, num_states=1, backend=device.type)
    with pytest.raises(ValueError, match="time dimension first"):
        m(torch.tensor(1.0, device=device))
    m.reset()
    m.states = [torch.zeros(3, device=device)]
    with pytest.raises(ValueError, match="state #0 has 3 elements per step"):
        m(torch.randn(4, 5, device=device))
    m.reset()
    m.states = [torch.zeros(5, device=device, dtype=torch.float64)]
    with pytest.raises(TypeError, match="state #0 has dtype torch.float64"):
        m(torch.randn(4, 5, device=device))
    for bad in ([1.0, 2.0], None):
        m.reset()
        with pytest.raises(TypeError, match="must be a torch.Tensor"):
            m(bad)
    m.reset()
    r = flexsn.FlexSN(lif(), num_inputs=1, num_states=1, backend="torch")
    x = torch.randn(6, device=device) * 2
    assert_close(m(x), r(x), what="rank-1 input")
    x = torch.randn(4, 5, device=device).abs()
    v_init = torch.rand(5, device=device) * 0.5
    grads = []
    for mod in (m, r):
        mod.reset()
        v0 = v_init.clone().requires_grad_()
        mod.states = [v0]
        mod(x).sum().backward()
        grads.append(v0.grad)
    assert grads[0] is not None
    assert_close(grads[0], grads[1], what="user state gradient")
