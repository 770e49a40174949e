"""flexsn.from_snntorch against snnTorch 1.0's own neurons stepped in a
Python loop: outputs, states and the gradients of the input and of every
learnable parameter."""

import copy
import pickle

import pytest
import torch

import flexsn
import snntorch as snn
import snntorch.surrogate as ss
import snntorch.utils as su

RTOL, ATOL = 1e-5, 1e-6


def _loop(neuron, x):
    outs = [neuron(x[t]) for t in range(x.shape[0])]
    if isinstance(outs[0], tuple):
        return tuple(torch.stack([o[k] for o in outs]) for k in range(len(outs[0])))
    return (torch.stack(outs),)


def _as_tuple(r):
    return r if isinstance(r, tuple) else (r,)


def _compare(make, device, T, shape=(3, 5), scale=0.8, shift=0.4):
    torch.manual_seed(T)
    ref = make().to(device)
    ours = flexsn.from_snntorch(copy.deepcopy(ref))
    x = (torch.randn(T, *shape, device=device) * scale + shift).requires_grad_()
    stepped = flexsn.from_snntorch(copy.deepcopy(ref))
    compiled = flexsn.from_snntorch(copy.deepcopy(ref))
    want = _loop(ref, x)
    got = _as_tuple(ours.forward_sequence(x))
    # a call is one step, as in snnTorch: the same loop gives the same values
    for w, g in zip(want, _loop(stepped, x)):
        torch.testing.assert_close(g, w, rtol=RTOL, atol=ATOL)
    if T == 7:
        # and so under torch.compile, where a step runs as the one-step scan
        # (the loop one graph: snnTorch's own forward would break it)
        torch._dynamo.reset()
        loop = torch.compile(lambda v: _loop(compiled, v), backend="aot_eager", fullgraph=True)
        for w, g in zip(want, loop(x)):
            torch.testing.assert_close(g, w, rtol=RTOL, atol=ATOL)
    assert len(want) == len(got)
    for w, g in zip(want, got):
        torch.testing.assert_close(g, w, rtol=RTOL, atol=ATOL)
    weights = [torch.randn_like(w) for w in want]
    ref_params = [p for p in ref.parameters()]
    our_params = [p for p in ours.parameters()]
    gw = torch.autograd.grad(sum((w * k).sum() for w, k in zip(want, weights)),
                             [x] + ref_params, allow_unused=True)
    gg = torch.autograd.grad(sum((g * k).sum() for g, k in zip(got, weights)),
                             [x] + our_params, allow_unused=True)
    for a, b in zip(gw, gg):
        if a is None:
            assert b is None or not b.any()
            continue
        torch.testing.assert_close(b, a, rtol=RTOL, atol=ATOL * max(1.0, a.abs().max().item()))
    return ours


RESETS = ["subtract", "zero", "none"]


@pytest.mark.parametrize("T", [1, 7, 50])
@pytest.mark.parametrize("reset", RESETS)
@pytest.mark.parametrize("delay", [True, False])
def test_leaky(device, T, reset, delay):
    _compare(lambda: snn.Leaky(beta=torch.linspace(0.5, 0.95, 5), learn_beta=True,
                               threshold=0.8, learn_threshold=True, reset_mechanism=reset,
                               reset_delay=delay), device, T)


@pytest.mark.parametrize("T", [1, 7, 50])
@pytest.mark.parametrize("reset", RESETS)
@pytest.mark.parametrize("delay", [True, False])
def test_synaptic(device, T, reset, delay):
    _compare(lambda: snn.Synaptic(alpha=0.7, beta=torch.linspace(0.6, 0.9, 5), learn_alpha=True,
                                  learn_beta=True, learn_threshold=True, reset_mechanism=reset,
                                  reset_delay=delay), device, T)


@pytest.mark.parametrize("T", [1, 7, 50])
@pytest.mark.parametrize("reset", RESETS)
def test_alpha(device, T, reset):
    _compare(lambda: snn.Alpha(alpha=0.9, beta=0.8, learn_beta=True, learn_threshold=True,
                               reset_mechanism=reset), device, T)


@pytest.mark.parametrize("T", [1, 7, 50])
@pytest.mark.parametrize("reset", RESETS)
@pytest.mark.parametrize("how", ["beta", "RC"])
def test_lapicque(device, T, reset, how):
    kw = dict(beta=0.9) if how == "beta" else dict(R=2.0, C=3.0, time_step=0.5)
    _compare(lambda: snn.Lapicque(**kw, learn_threshold=True, reset_mechanism=reset), device, T)


@pytest.mark.parametrize("T", [1, 7, 50])
@pytest.mark.parametrize("reset", RESETS)
@pytest.mark.parametrize("delay", [True, False])
def test_rleaky(device, T, reset, delay):
    _compare(lambda: snn.RLeaky(beta=0.9, all_to_all=False, V=torch.linspace(-0.5, 0.5, 5),
                                learn_beta=True, reset_mechanism=reset, reset_delay=delay),
             device, T)


@pytest.mark.parametrize("T", [1, 7, 50])
@pytest.mark.parametrize("reset", RESETS)
def test_rsynaptic(device, T, reset):
    _compare(lambda: snn.RSynaptic(alpha=0.7, beta=0.9, all_to_all=False, V=0.3,
                                   learn_alpha=True, learn_beta=True, reset_mechanism=reset),
             device, T)


def test_rsynaptic_reset_now(device):
    """snnTorch 1.0's RSynaptic(reset_delay=False) fails (it reads the spk
    argument); ours resets at once as RLeaky and Synaptic do."""
    torch.manual_seed(0)
    x = torch.randn(20, 4, device=device) + 0.5
    ours = flexsn.from_snntorch(snn.RSynaptic(alpha=0.7, beta=0.9, all_to_all=False, V=0.3,
                                              reset_delay=False).to(device))
    spk, syn, mem = ours.forward_sequence(x)
    s, i, v = torch.zeros(4, device=device), torch.zeros(4, device=device), \
        torch.zeros(4, device=device)
    for t in range(20):
        r = (v - 1 > 0).float()
        i = 0.7 * i + x[t] + 0.3 * s
        v = 0.9 * v + i - r
        s = (v - 1 > 0).float()
        v = v - (s - r)
        torch.testing.assert_close(spk[t], s)
        torch.testing.assert_close(mem[t], v, rtol=RTOL, atol=ATOL)


SURROGATES = {
    "atan": lambda: ss.atan(alpha=3.0), "sigmoid": lambda: ss.sigmoid(slope=5),
    "fast_sigmoid": lambda: ss.fast_sigmoid(slope=10),
    "straight_through_estimator": ss.straight_through_estimator,
    "triangular": lambda: ss.triangular(threshold=0.7),
    "spike_rate_escape": lambda: ss.spike_rate_escape(beta=1.5, slope=3),
    "heaviside": ss.heaviside,
}


@pytest.mark.parametrize("name", list(SURROGATES))
def test_surrogates(device, name):
    _compare(lambda: snn.Leaky(beta=0.8, learn_beta=True, spike_grad=SURROGATES[name]()),
             device, 7)


def test_graded_spikes_and_disabled_surrogate(device):
    _compare(lambda: snn.Leaky(beta=0.8, graded_spikes_factor=2.5,
                               learn_graded_spikes_factor=True, reset_delay=False), device, 7)
    _compare(lambda: snn.Leaky(beta=0.8, surrogate_disable=True), device, 7)


def test_init_hidden_and_output(device):
    _compare(lambda: snn.Leaky(beta=0.8, init_hidden=True), device, 7)
    _compare(lambda: snn.Synaptic(alpha=0.5, beta=0.8, init_hidden=True, output=True), device, 7)


def test_state_semantics(device):
    """States live where snnTorch keeps them: a call continues from them,
    passing one overrides, init_leaky()/utils.reset re-zero."""
    torch.manual_seed(1)
    ref = snn.Leaky(beta=0.8).to(device)
    ours = flexsn.from_snntorch(snn.Leaky(beta=0.8).to(device))
    x = torch.randn(6, 3, device=device) + 0.5
    want = _loop(ref, x)
    spk1, mem1 = ours.forward_sequence(x[:3])
    spk2, mem2 = ours.forward_sequence(x[3:])  # continues from the stored mem
    torch.testing.assert_close(torch.cat([mem1, mem2]), want[1])
    ours.init_leaky()
    mem0 = torch.full((3,), 0.7, device=device)
    spk, mem = ours.forward_sequence(x, mem0)
    ref.init_leaky()
    want = [ref(x[t], mem0 if t == 0 else None) for t in range(6)]
    torch.testing.assert_close(mem, torch.stack([w[1] for w in want]))
    net = torch.nn.Sequential(ours)
    su.reset(net)
    assert ours.mem.numel() == 0 or not ours.mem.any()
    with pytest.raises(TypeError, match="init_hidden"):
        flexsn.from_snntorch(snn.Leaky(0.8, init_hidden=True)).forward_sequence(x, mem0)


def test_shared_parameters_and_state_dict():
    lif = snn.Leaky(beta=0.8, learn_beta=True)
    ours = flexsn.from_snntorch(lif)
    assert ours.beta is lif.beta
    assert isinstance(ours, snn.Leaky)
    assert set(ours.state_dict()) == set(lif.state_dict())
    ours.forward_sequence(torch.randn(4, 2)).__getitem__(1).sum().backward()
    assert lif.beta.grad is not None
    built = flexsn.snntorch.Leaky(beta=0.8)
    torch.testing.assert_close(built.forward_sequence(torch.ones(3, 2))[1][:, 0],
                               torch.tensor([1.0, 1.8, 1.44]))


def test_reset_follows_state_dict():
    """The reset is snnTorch's buffer: loading a state_dict that changes it
    changes the dynamics, as in snnTorch."""
    x = torch.ones(4, 2)
    ours = flexsn.from_snntorch(snn.Leaky(beta=0.8))
    subtract = ours.forward_sequence(x)[1]
    zero = snn.Leaky(beta=0.8, reset_mechanism="zero")
    ours.load_state_dict(zero.state_dict())
    ours.init_leaky()
    torch.testing.assert_close(ours.forward_sequence(x)[1], _loop(zero, x)[1])
    assert not torch.equal(ours.mem, subtract[-1])


def test_pickle_and_deepcopy():
    ours = flexsn.from_snntorch(snn.Leaky(beta=0.8, spike_grad=ss.fast_sigmoid(slope=7)))
    x = torch.randn(5, 3)
    want = ours.forward_sequence(x)
    for copy_ in (pickle.loads(pickle.dumps(ours)), copy.deepcopy(ours)):
        copy_.init_leaky()
        ours.init_leaky()
        torch.testing.assert_close(copy_.forward_sequence(x)[1], ours.forward_sequence(x)[1])
        assert flexsn.snntorch.surrogate_of(copy_).scale_in == 7
    assert want[0].shape == (5, 3)


def test_refusals():
    with pytest.raises(ValueError, match="all_to_all"):
        flexsn.from_snntorch(snn.RLeaky(beta=0.9, linear_features=4))
    with pytest.raises(ValueError, match="inhibition"):
        with pytest.warns(UserWarning):
            flexsn.from_snntorch(snn.Leaky(beta=0.9, inhibition=True))
    with pytest.raises(ValueError, match="custom_surrogate"):
        flexsn.from_snntorch(snn.Leaky(beta=0.9, spike_grad=ss.custom_surrogate(
            lambda i, g, o: g)))
    with pytest.raises(ValueError, match="SLSTM|LSTM"):
        flexsn.from_snntorch(snn.SLSTM(3, 3))
    with pytest.raises(TypeError, match="snnTorch neuron"):
        flexsn.from_snntorch(torch.nn.Linear(2, 2))

    class Mine(snn.Leaky):
        def fire(self, mem):
            return mem

    with pytest.raises(ValueError, match="overrides fire"):
        flexsn.from_snntorch(Mine(beta=0.9))
    ours = flexsn.from_snntorch(snn.Leaky(beta=0.9))
    with pytest.raises(ValueError, match="time dimension"):
        ours.forward_sequence(torch.tensor(1.0))
    with pytest.raises(TypeError, match="floating-point"):
        ours.forward_sequence(torch.ones(3, 2, dtype=torch.int64))
    assert ours.forward_sequence(torch.zeros(0, 4))[0].shape == (0, 4)


def test_torch_compile():
    """Under torch.compile(fullgraph=True) (the scan is our custom op; the
    configuration is the last eager call's): the same spikes and gradients."""
    torch.manual_seed(2)
    x = (torch.randn(10, 4, 8) + 0.5).requires_grad_()
    ours = flexsn.from_snntorch(snn.Synaptic(alpha=0.5, beta=0.9))
    want = ours.forward_sequence(x)
    gw = torch.autograd.grad(want[2].sum(), x)
    ours.init_synaptic()
    got = torch.compile(ours.forward_sequence, backend="aot_eager", fullgraph=True)(x)
    torch.testing.assert_close(got[2], want[2])
    torch.testing.assert_close(torch.autograd.grad(got[2].sum(), x), gw)
