"""Sequences in a permuted dense layout (channels-last per step) run in that
layout: outputs, state sequences, final states and input gradients come
back with the input's strides, with the values of a contiguous run."""

import pytest
import torch
from torch import nn

import flexsn

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _device_param(dev):
    return pytest.param(dev, marks=pytest.mark.cuda) if dev == "cuda" else dev


def _channels_last(t):
    """[T, B, C, H, W] with each step channels-last."""
    return t.permute(0, 1, 3, 4, 2).contiguous().permute(0, 1, 4, 2, 3)


def _sj_lif():
    sj = pytest.importorskip("spikingjelly.activation_based.neuron")
    return flexsn.convert(sj.LIFNode(step_mode="m", store_v_seq=True))


def _sj_lif_reset():
    """Fresh states that are not zeros: filled tensors laid out as the step."""
    sj = pytest.importorskip("spikingjelly.activation_based.neuron")
    return flexsn.convert(sj.LIFNode(step_mode="m", store_v_seq=True, v_reset=-0.25))


def _our_lif():
    return flexsn.neuron.LIFNode(step_mode="m", store_v_seq=True)


def _reset(n):
    n.reset()


# Gradients: the CPU kernels may round an element differently by where it
# falls in a vector (one ulp); spikes and states are compared exactly.
TOL = dict(rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device", [_device_param(d) for d in DEVICES])
@pytest.mark.parametrize("make", [_sj_lif, _sj_lif_reset, _our_lif],
                         ids=["spikingjelly", "spikingjelly-reset", "flexsn"])
def test_channels_last_in_channels_last_out(device, make):
    torch.manual_seed(0)
    x = torch.randn(4, 2, 3, 5, 6, device=device) * 2
    g = torch.randn_like(x)
    n = make().to(device)
    runs = []
    for layout in (_channels_last, lambda t: t.clone()):
        xi = layout(x).requires_grad_()
        out = n(xi)
        v_seq = n.v_seq
        out2 = n(layout(x))  # a second chunk from the first's final state
        v = n.v
        (out * layout(g)).sum().backward()
        runs.append((xi, out, v_seq, out2, v))
        _reset(n)
    (xc, oc, qc, o2c, vc), (x0, o0, q0, o20, v0) = runs
    assert oc.stride() == xc.stride() and o2c.stride() == xc.stride()
    assert qc.stride() == xc.stride() and vc.stride() == xc.stride()[1:]
    assert xc.grad.stride() == xc.stride()
    assert torch.equal(oc, o0) and torch.equal(o2c, o20)
    assert torch.equal(qc, q0) and torch.equal(vc, v0)
    torch.testing.assert_close(xc.grad, x0.grad, **TOL)


@pytest.mark.parametrize("backend", [None, "torch"])
def test_closed_over_tensor(backend):
    """A core that closes over a per-channel tensor: the compiled kernels
    take it laid out as the permuted step (the torch loop reads it itself,
    on the input as given). C = H = W would let a tensor left in the
    step's own order broadcast over the wrong axis without an error; the
    results must be the contiguous ones."""
    C = 4
    threshold = torch.linspace(0.5, 1.5, C).view(C, 1, 1)

    def core(x, v):
        h = v + (x - v) / 2
        s = flexsn.surrogate.Sigmoid()(h - threshold)
        return s, h * (1 - s)
    torch.manual_seed(5)
    x = torch.rand(3, 2, C, C, C) * 3
    outs = []
    for xi in (_channels_last(x), x):
        n = flexsn.FlexSN(core, num_inputs=1, num_states=1, num_outputs=1, step_mode="m",
                          backend=backend)
        outs.append(n(xi))
    if backend is None:
        assert outs[0].stride() == _channels_last(x).stride()
    assert torch.equal(outs[0], outs[1])


@pytest.mark.parametrize("device", [_device_param(d) for d in DEVICES])
def test_per_channel_parameters(device):
    """Parameters that are not scalars (a learnable per-channel decay and a
    per-channel threshold, snnTorch's Leaky; a per-channel FlexSN static
    input) run channels-last laid out as the permuted step: the same
    values and gradients, parameters' included, and the input's strides
    kept."""
    snn = pytest.importorskip("snntorch")
    C = 4
    torch.manual_seed(6)
    x = torch.rand(3, 2, C, C, C, device=device) * 2
    g = torch.randn_like(x)

    def leaky():
        beta = torch.linspace(0.5, 0.9, C).view(C, 1, 1)
        thr = torch.linspace(0.8, 1.2, C).view(C, 1, 1)
        return flexsn.from_snntorch(snn.Leaky(beta=beta, threshold=thr, learn_beta=True))

    def gated():
        gain = nn.Parameter(torch.linspace(0.5, 1.5, C).view(C, 1, 1))

        def core(x, v, gain):
            h = v + (x * gain - v) / 2
            s = flexsn.surrogate.Sigmoid()(h - 1.0)
            return s, h * (1 - s)
        return flexsn.FlexSN(core, num_inputs=1, num_states=1, num_outputs=1,
                             step_mode="m", static_inputs=(gain,))
    for make in (leaky, gated):
        runs = []
        for layout in (_channels_last, lambda t: t.clone()):
            torch.manual_seed(0)
            n = make().to(device)
            xi = layout(x).requires_grad_()
            out = n(xi)
            out = out[0] if isinstance(out, tuple) else out
            (out * layout(g)).sum().backward()
            grads = [p.grad.clone() for p in n.parameters() if p.grad is not None]
            runs.append((xi, out, grads))
        (xc, oc, gc_), (x0, o0, g0) = runs
        assert oc.stride() == xc.stride()
        assert torch.equal(oc, o0)
        torch.testing.assert_close(xc.grad, x0.grad, **TOL)
        assert len(gc_) == len(g0) >= 1
        for a, b in zip(gc_, g0):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("make", [_sj_lif, _our_lif], ids=["spikingjelly", "flexsn"])
@pytest.mark.parametrize("view", ["strided", "time-inner"])
def test_other_layouts_run_contiguous(make, view):
    """Not dense, or T not outermost: a contiguous copy runs, as before."""
    torch.manual_seed(1)
    if view == "strided":
        base = torch.randn(4, 2, 3, 5, 12) * 2
        x = base[..., ::2]
    else:
        base = torch.randn(2, 4, 3, 5, 6) * 2
        x = base.transpose(0, 1)
    assert not x.is_contiguous()
    n = make()
    out = n(x)
    n.reset()
    ref = n(x.contiguous())
    assert out.is_contiguous()
    assert torch.equal(out, ref)


def _conv_net(device):
    pytest.importorskip("spikingjelly")
    from spikingjelly.activation_based import functional, layer, neuron
    torch.manual_seed(2)
    net = nn.Sequential(layer.Conv2d(3, 8, 3, padding=1, bias=False), layer.BatchNorm2d(8),
                        neuron.LIFNode(), layer.Conv2d(8, 8, 3, padding=1, bias=False),
                        layer.BatchNorm2d(8), neuron.LIFNode(), layer.Flatten(),
                        layer.Linear(8 * 6 * 6, 4))
    functional.set_step_mode(net, "m")
    return flexsn.convert(net).to(device), functional


@pytest.mark.parametrize("device", [_device_param(d) for d in DEVICES])
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_channels_last_network(device, compiled):
    """A converted conv-BN-LIF network in channels-last: every neuron hands
    the next convolution a channels-last sequence; loss and gradients are
    those of the contiguous network."""
    net, functional = _conv_net(device)
    torch.manual_seed(3)
    x = torch.rand(4, 2, 3, 6, 6, device=device)
    y = torch.randint(0, 4, (2,), device=device)
    results = []
    for channels_last in (True, False):
        model = net.to(memory_format=torch.channels_last if channels_last
                       else torch.contiguous_format)
        strides = []
        hooks = [m.register_forward_hook(lambda m, a, o: strides.append((a[0].stride(),
                                                                         o.stride())))
                 for m in model.modules() if type(m).__name__ == "LIFNode"]
        if compiled:
            # static shapes: with dynamic ones, Inductor 2.11 fails on
            # SpikingJelly's convolution layers alone (no neuron needed)
            torch._dynamo.reset()
        run = torch.compile(model, dynamic=False) if compiled else model
        xi = _channels_last(x) if channels_last else x
        functional.reset_net(model)
        model.zero_grad(set_to_none=True)
        # TF32 convolutions (cuDNN's default) round each layout differently
        with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
            loss = nn.functional.cross_entropy(run(xi).mean(0), y)
            loss.backward()
        for h in hooks:
            h.remove()
        if channels_last and not compiled:
            assert len(strides) == 2
            for s_in, s_out in strides:
                assert s_out == s_in and s_in[2] == 1  # channels innermost
        results.append((loss.detach(), [p.grad.clone() for p in model.parameters()]))
    (l_cl, g_cl), (l_c, g_c) = results
    torch.testing.assert_close(l_cl, l_c, **TOL)
    for a, b in zip(g_cl, g_c):
        # cuDNN sums a channels-last convolution in another order than a
        # contiguous one; a wrong layout would be off by the gradient's scale
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4 * b.abs().max().item())


def _snntorch_leaky():
    snn = pytest.importorskip("snntorch")
    return flexsn.multistep(flexsn.from_snntorch(snn.Leaky(beta=0.8)))


def _norse_lif():
    nt = pytest.importorskip("norse.torch")
    return flexsn.from_norse(nt.LIF())


@pytest.mark.parametrize("make", [_snntorch_leaky, _norse_lif], ids=["snntorch", "norse"])
def test_library_neurons_keep_channels_last(make):
    torch.manual_seed(4)
    x = torch.randn(5, 2, 3, 4, 4) * 2
    out, ref = make()(_channels_last(x)), make()(x)  # fresh states each
    first = lambda r: r[0] if isinstance(r, tuple) else r  # noqa: E731
    assert first(out).stride() == _channels_last(x).stride()
    assert torch.equal(first(out), first(ref))


def test_mismatched_state_named_in_the_input_order():
    """A channels-last call whose kept state has the wrong shape fails with
    the input's own shape in the message, not its permuted one."""
    n = flexsn.neuron.LIFNode(step_mode="m")
    x = _channels_last(torch.randn(4, 2, 3, 5, 6))
    n(x)
    n.sn.__dict__["states"] = [torch.zeros(2, 3, 5, 7)]
    with pytest.raises(ValueError, match=r"shape \(2, 3, 5, 6\)"):
        n(x)
