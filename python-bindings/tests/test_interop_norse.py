"""flexsn.from_norse against Norse 1.1's own multi-step modules (and
cells stepped in a loop): outputs, final states and gradients."""

import copy
import pickle

import pytest
import torch

import flexsn
import norse.torch as nt
from norse.torch.functional import superspike
from norse.torch.functional.izhikevich import tonic_spiking, spike_frequency_adaptation
from norse.torch.functional.reset import reset_subtract

RTOL, ATOL = 1e-5, 1e-6


def _run(module, x, cell):
    if not cell:
        return module(x)
    outs, state = [], None
    for t in range(x.shape[0]):
        o, state = module(x[t], state)
        outs.append(o)
    return torch.stack(outs), state


def _compare(module, device, T=50, cell=False, scale=40.0, shift=20.0, params=(), **kw):
    torch.manual_seed(T)
    ours = flexsn.from_norse(module, **kw)
    x = (torch.randn(T, 3, 4, device=device) * scale + shift).requires_grad_()
    zr, sr = _run(module, x, cell)
    zg, sg = ours.forward_sequence(x)
    if cell:  # a call is one step, as in Norse: the same loop gives the same values
        zs, ss = _run(ours, x, True)
        torch.testing.assert_close(zs, zr, rtol=RTOL, atol=ATOL)
        for a, b in zip(sr, ss):
            torch.testing.assert_close(b, a, rtol=RTOL, atol=ATOL * 100)
    assert type(sg) is type(sr)
    torch.testing.assert_close(zg, zr, rtol=RTOL, atol=ATOL)
    for a, b in zip(sr, sg):
        torch.testing.assert_close(b, a.expand_as(b), rtol=RTOL, atol=ATOL * 100)
    w = torch.randn_like(zr)
    loss_r = (zr * w).sum() + sum(s.sum() for s in sr)
    loss_g = (zg * w).sum() + sum(s.sum() for s in sg)
    gr = torch.autograd.grad(loss_r, [x, *params])
    gg = torch.autograd.grad(loss_g, [x, *params])
    for a, b in zip(gr, gg):
        torch.testing.assert_close(b, a, rtol=RTOL, atol=ATOL * max(1.0, a.abs().max().item()))


def _p(device, cls, **kw):
    return cls(**{k: torch.as_tensor(v, device=device) if not isinstance(v, str) else v
                  for k, v in kw.items()})


METHODS = [("super", 1.0), ("triangle", 0.3), ("tanh", 2.0), ("circ", 2.0),
           ("heavi_erfc", 2.0), ("heaviside", 1.0)]


@pytest.mark.parametrize("T", [1, 7, 50])
@pytest.mark.parametrize("method,alpha", METHODS)
def test_lif(device, T, method, alpha):
    p = _p(device, nt.LIFParameters, method=method, alpha=alpha)
    _compare(nt.LIF(p), device, T, superspike="released")
    _compare(nt.LIFCell(p), device, T, cell=True, superspike="released")


def test_lif_learnable_per_neuron(device):
    tau = torch.nn.Parameter(torch.linspace(80., 120., 4, device=device))
    vth = torch.nn.Parameter(torch.tensor(0.7, device=device))
    p = nt.LIFParameters(tau_mem_inv=tau, v_th=vth, alpha=torch.tensor(1.0), method="super")
    _compare(nt.LIF(p), device, params=(tau, vth), superspike="released")


def test_superspike_formula(device, monkeypatch):
    """superspike='formula' is grad / (alpha |x| + 1)^2: Norse 1.1.0 patched
    to it gives the same gradients."""
    def backward(ctx, grad_output):
        (inp,) = ctx.saved_tensors
        return grad_output / (ctx.alpha * torch.abs(inp) + 1.0).pow(2), None
    monkeypatch.setattr(superspike.SuperSpike, "backward", staticmethod(backward))
    _compare(nt.LIF(), device)  # alpha = 100


@pytest.mark.parametrize("subtract", [False, True])
def test_lif_box(device, subtract):
    kw = {"reset_method": reset_subtract} if subtract else {}
    p = nt.LIFBoxParameters(alpha=torch.tensor(1.0), **kw)
    _compare(nt.LIFBoxCell(p), device, cell=True, superspike="released")
    _compare(nt.Lift(nt.LIFBoxCell(p)), device, superspike="released")


def test_li(device):
    _compare(nt.LI(), device)
    _compare(nt.LICell(), device, cell=True)


def test_iaf(device):
    # Norse's IAFCell needs its parameters on the input's device
    p = _p(device, nt.IAFParameters, v_th=1.0, v_reset=0.0, alpha=1.0)
    _compare(nt.IAF(p), device, scale=0.5, shift=0.1, superspike="released")
    _compare(nt.IAFCell(p), device, cell=True,
             scale=0.5, shift=0.1, superspike="released")


def test_lif_adex(device):
    p = nt.LIFAdExParameters(alpha=1.0)
    _compare(nt.LIFAdEx(p), device, superspike="released")
    _compare(nt.LIFAdExCell(p), device, cell=True, superspike="released")


@pytest.mark.parametrize("behaviour", [tonic_spiking, spike_frequency_adaptation])
def test_izhikevich(device, behaviour):
    _compare(nt.Izhikevich(behaviour), device, T=100, scale=5, shift=10, superspike="released")
    _compare(nt.IzhikevichCell(behaviour), device, T=100, cell=True, scale=5, shift=10,
             superspike="released")


def test_initial_state_and_record(device):
    lif = nt.LIF(record_states=True)
    ours = flexsn.from_norse(lif)
    x = torch.randn(10, 2, 3, device=device) * 40 + 20
    z, states = ours(x)
    zr, sr = lif(x)
    torch.testing.assert_close(states.v, sr.v)
    state = nt.LIFFeedForwardState(v=torch.full((2, 3), 0.5, device=device),
                                   i=torch.zeros(2, 3, device=device))
    lif.record_states = False
    torch.testing.assert_close(ours(x, state)[1].v, lif(x, state)[1].v)
    with pytest.raises(TypeError, match="LIFFeedForwardState"):
        ours(x, (torch.zeros(2, 3),))
    with pytest.raises(ValueError, match="broadcast"):
        ours(x, nt.LIFFeedForwardState(torch.zeros(5), torch.zeros(5)))


def test_pickle_and_deepcopy():
    # Norse 1.1.0's LIFParameters (a pytree class) does not pickle; IAF's does
    ours = flexsn.from_norse(nt.IAF())
    x = torch.randn(5, 2)
    torch.testing.assert_close(pickle.loads(pickle.dumps(ours))(x)[0], ours(x)[0])
    lif = flexsn.from_norse(nt.LIF())
    x = x * 40 + 20
    torch.testing.assert_close(copy.deepcopy(lif)(x)[1].v, lif(x)[1].v)


def test_refusals():
    with pytest.raises(ValueError, match="adjoint"):
        flexsn.from_norse(nt.LIF(nt.LIFParameters(method="adjoint")))
    with pytest.raises(ValueError, match="supported"):
        flexsn.from_norse(nt.LSNN())
    with pytest.raises(ValueError, match="superspike"):
        flexsn.from_norse(nt.LIF(), superspike="maybe")
    with pytest.raises(TypeError):
        flexsn.from_norse("LIF")


def test_torch_compile():
    torch.manual_seed(2)
    x = (torch.randn(10, 4, 8) * 40 + 20).requires_grad_()
    ours = flexsn.from_norse(nt.LIF())
    want = ours(x)
    gw = torch.autograd.grad(want[1].v.sum(), x)
    got = torch.compile(ours, backend="aot_eager", fullgraph=True)(x)
    torch.testing.assert_close(got[1].v, want[1].v)
    torch.testing.assert_close(torch.autograd.grad(got[1].v.sum(), x), gw)
