"""flexsn.chunked_time: an inference call's T steps as chunks side by side,
each chunk settled from the state the chunk before ends with. Outputs,
state sequences and final states are the sequential scan's bit for bit:
where the chunks settle, and where they do not (the sequential scan runs
instead)."""

import pytest
import torch
from torch import nn

import flexsn
from flexsn import surrogate


def _lif(x, v, tau, v_th):  # a reset, a threshold per neuron
    h = v + (x - v) / tau
    s = surrogate.ATan()(h - v_th)
    return s, h * (1 - s)


def _li(x, v, tau, v_th):   # affine: a leak, no reset
    h = v + (x - v) / tau
    return h - v_th, h


def _integrator(x, v, tau, v_th):  # never forgets where it started
    h = v + x
    return h, h


def _neuron(core, device, seqs=False):
    tau = torch.tensor([2.0], device=device)
    v_th = torch.linspace(0.5, 1.5, 24, device=device).view(4, 6)
    return flexsn.FlexSN(core, num_states=1, static_inputs=(tau, v_th), store_state_seqs=seqs)


def _bits(t):
    return t.view(torch.int32)


@pytest.mark.parametrize("core", [_lif, _li, _integrator], ids=["lif", "li", "integrator"])
@pytest.mark.parametrize("seqs", [False, True], ids=["outputs", "state-seqs"])
def test_chunks_give_the_sequential_scan_bit_for_bit(device, core, seqs):
    torch.manual_seed(0)
    m = _neuron(core, device, seqs)
    x = torch.rand(256, 4, 6, device=device) * 2
    v0 = torch.rand(4, 6, device=device)
    def run():
        m.reset()
        m.states = [v0.clone()]
        out = m(x)
        return [out, m.states[0]] + (list(m.state_seqs) if seqs else [])
    with torch.no_grad():
        want = run()
        assert not torch.equal(want[1], v0)
        for chunks in (2, 4, 8):  # 32 steps or more: a leak of 1/2 a step forgets 2^-32
            with flexsn.chunked_time(chunks) as calls:
                got = run()
            assert calls.calls == 1
            if core is _integrator:  # one chunk more settles a round: `chunks` rounds
                assert calls.launches == min(chunks, 4)
                assert calls.sequential == (chunks > 4)
            else:  # a leak or a reset forgets the guess within a chunk
                assert calls.sequential == 0 and calls.launches <= 3, calls
            assert len(got) == len(want)
            for a, b in zip(got, want):
                assert torch.equal(_bits(a), _bits(b)), (core.__name__, chunks)


def test_a_call_the_chunks_do_not_divide_runs_as_before(device):
    m = _neuron(_lif, device)
    x = torch.rand(30, 4, 6, device=device) * 2
    with torch.no_grad():
        m.reset()
        want = m(x)
        m.reset()
        with flexsn.chunked_time(4):  # 30 steps: not 4 chunks
            assert torch.equal(m(x), want)


def test_training_calls_run_as_before(device):
    m = _neuron(_lif, device)
    x = (torch.rand(32, 4, 6, device=device) * 2).requires_grad_()
    m.reset()
    want = m(x)
    g_want, = torch.autograd.grad(want.sum() + m.states[0].sum(), x)
    m.reset()
    with flexsn.chunked_time(4):
        got = m(x)
        g_got, = torch.autograd.grad(got.sum() + m.states[0].sum(), x)
    assert torch.equal(got, want) and torch.equal(g_got, g_want)


def test_a_plan_made_outside_is_not_taken_inside():
    """A repeated call's fast path is the sequential scan's: the chunks'
    calls take their own path (the same numbers either way)."""
    m = _neuron(_li, "cpu")
    x = torch.rand(16, 4, 6)
    with torch.no_grad():
        for _ in range(2):  # the second call runs the plan the first kept
            m.reset()
            want = m(x)
        with flexsn.chunked_time(4):
            for _ in range(2):
                m.reset()
                assert torch.equal(m(x), want)


@pytest.mark.parametrize("chunks, rounds, what", [
    (1, 4, "chunks must be an int >= 2"), (2.0, 4, "chunks must be an int >= 2"),
    (True, 4, "chunks must be an int >= 2"), (4, 0, "rounds must be an int >= 1")])
def test_bad_arguments_name_the_problem(chunks, rounds, what):
    with pytest.raises(ValueError, match=what):
        with flexsn.chunked_time(chunks, rounds):
            pass


def test_layers_of_a_network_chunk_too():
    """flexsn.multistep runs each neuron as one scan: inside, each chunks."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 8), flexsn.neuron.LIFNode(step_mode="m"),
                        nn.Linear(8, 3), flexsn.neuron.LIFNode(step_mode="m"))
    x = torch.rand(48, 2, 6) * 3
    with torch.no_grad():
        for m in net:
            getattr(m, "reset", lambda: None)()
        want = net(x)
        for m in net:
            getattr(m, "reset", lambda: None)()
        with flexsn.chunked_time(6):
            got = net(x)
    assert torch.equal(got, want)
