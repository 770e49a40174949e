"""Predefined IF/LIF/PLIF nodes against an independent torch loop of
SpikingJelly's published equations: spikes, membrane potentials and the
gradients of the input and of PLIF's decay parameter."""

import math

import pytest
import torch

import flexsn
from flexsn import neuron, surrogate
from conftest import assert_close


def reference(kind, x, *, tau=2., w=None, decay_input=True, v_th=1., v_reset=0.,
              detach_reset=False, sg=None):
    """The equations, step by step, with autograd through the surrogate."""
    sg = sg or surrogate.Sigmoid()
    v = torch.full_like(x[0], 0. if v_reset is None else v_reset)
    base = v_reset or 0.
    spikes, vs = [], []
    for t in range(x.shape[0]):
        if kind == "if":
            h = v + x[t]
        else:
            k = torch.sigmoid(w) if kind == "plif" else 1. / tau
            h = v + (x[t] - (v - base)) * k if decay_input else v - (v - base) * k + x[t]
        s = sg(h - v_th)
        sr = s.detach() if detach_reset else s
        v = h - sr * v_th if v_reset is None else h * (1. - sr) + v_reset * sr
        spikes.append(s)
        vs.append(v)
    return torch.stack(spikes), torch.stack(vs)


CASES = [dict(v_reset=0.), dict(v_reset=None), dict(v_reset=-0.2, detach_reset=True),
         dict(v_reset=None, detach_reset=True)]


@pytest.mark.parametrize("case", CASES, ids=str)
@pytest.mark.parametrize("kind", ["if", "lif", "lif_nodecay", "plif"])
def test_node_matches_equations(device, kind, case):
    torch.manual_seed(0)
    x = (torch.randn(12, 4, 33, device=device) * 1.5)
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    sg = surrogate.ATan()
    if kind == "if":
        node = neuron.IFNode(surrogate_function=sg, step_mode="m", store_v_seq=True, **case)
        ref = reference("if", xb, sg=sg, **case)
    elif kind.startswith("lif"):
        di = kind == "lif"
        node = neuron.LIFNode(tau=3., decay_input=di, surrogate_function=sg, step_mode="m",
                              store_v_seq=True, **case)
        ref = reference("lif", xb, tau=3., decay_input=di, sg=sg, **case)
    else:
        node = neuron.ParametricLIFNode(init_tau=3., surrogate_function=sg, step_mode="m",
                                        store_v_seq=True, **case)
        w = torch.tensor([-math.log(2.)], requires_grad=True)
        ref = reference("plif", xb, w=w.to(device), sg=sg, **case)
    node.to(device)
    assert node.sn.compiled
    s = node(xa)
    assert_close(s, ref[0], what="spikes")
    assert_close(node.v_seq, ref[1], what="v_seq")
    assert_close(node.v, ref[1][-1], what="v")
    g = torch.randn_like(s)
    (s * g + node.v_seq.sin()).sum().backward()
    (ref[0] * g + ref[1].sin()).sum().backward()
    assert_close(xa.grad, xb.grad, what="grad x")
    if kind == "plif":
        assert node.w.grad is not None
        assert_close(node.w.grad.cpu(), w.grad, what="grad w")


def test_defaults_and_state():
    n = neuron.LIFNode()
    assert (n.tau, n.decay_input, n.v_threshold, n.v_reset, n.detach_reset) == \
        (2., True, 1., 0., False)
    assert n.step_mode == "s" and n.v == 0.
    x = torch.randn(5, 7) * 3
    s1 = n(x)                  # single step
    v1 = n.v.clone()
    n(x)
    assert not torch.equal(n.v, v1)
    n.reset()
    assert n.v == 0.
    assert torch.equal(n(x), s1)
    p = neuron.ParametricLIFNode(init_tau=4.)
    assert abs(torch.sigmoid(p.w).item() - 0.25) < 1e-6
    assert [name for name, _ in p.named_parameters()] == ["w"]
    with pytest.raises(ValueError, match="tau must be > 1"):
        neuron.LIFNode(tau=0.5)
    assert "tau=2.0" in repr(n)


def test_plif_learns(device):
    """A few SGD steps move w in the direction the equations' gradient says."""
    torch.manual_seed(2)
    node = neuron.ParametricLIFNode(step_mode="m").to(device)
    opt = torch.optim.SGD(node.parameters(), lr=0.5)
    x = torch.rand(8, 64, device=device) * 2
    w0 = node.w.item()
    for _ in range(3):
        node.reset()
        opt.zero_grad()
        node(x).mean().backward()   # more spikes: faster integration
        opt.step()
    assert node.w.item() < w0 or node.w.item() > w0


def test_nodes_under_torch_compile():
    torch.manual_seed(5)
    net = torch.nn.Sequential(torch.nn.Linear(8, 8), neuron.LIFNode(step_mode="m"),
                              torch.nn.Linear(8, 2), neuron.ParametricLIFNode(step_mode="m"))
    x = torch.randn(4, 3, 8)

    def run(m):
        for layer in (net[1], net[3]):
            layer.reset()
        return m(x)

    explain = torch._dynamo.explain(net)(x)
    assert explain.graph_break_count == 0, explain.break_reasons
    ref = run(net)
    ref.sum().backward()
    grads = [p.grad.clone() for p in net.parameters()]
    net.zero_grad()
    out = run(torch.compile(net, fullgraph=True, backend="aot_eager"))
    assert_close(out, ref)
    out.sum().backward()
    for p, g in zip(net.parameters(), grads):
        assert_close(p.grad, g, what="parameter gradient")


def test_plif_decay_gradient_at_a_million_neurons(device):
    """The scalar parameter's gradient sums 2^20 neurons: within 1e-5 of a
    float64 loop of the same equations (the CPU kernel accumulates in f64;
    the GPU reduces per block, then adds block sums atomically)."""
    torch.manual_seed(9)
    n = 1 << 20
    node = neuron.ParametricLIFNode(init_tau=3., step_mode="m").to(device)
    x = torch.rand(2, n, device=device) * 2
    node(x).sum().backward()
    w = torch.tensor([-math.log(2.)], dtype=torch.float64, requires_grad=True)
    s, _ = reference("plif", x.double().cpu(), w=w)
    s.sum().backward()
    rel = abs(node.w.grad.item() - w.grad.item()) / abs(w.grad.item())
    assert rel < 1e-5, rel
