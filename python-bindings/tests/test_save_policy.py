"""The training kernels under the compiler's automatic saving policy (a
minimum cut of the step's dataflow, `save-ops=auto`). For an f32 LIF the
forward saves h, the backward reads neither the input nor the state
sequence, and a call that wants no state sequences runs the final-state
pair: its forward writes the final state only, and the node keeps only h.
Gradients equal the torch loop's on both call paths, with and without
initial states, across calls that carry states with their gradients, and
with state sequences."""

import pytest
import torch

import flexsn
from conftest import assert_close
from cores import lif, tutorial



def _prep(m):
    """The module's one TrainingConfig."""
    from flexsn._compiled import TrainingConfig
    preps = [p for p in m.kernel.compiled.prepared.values() if isinstance(p, TrainingConfig)]
    assert len(preps) == 1, preps
    return preps[0]


def test_a_training_call_binds_only_the_pair_it_runs(device):
    # Binding a kernel fetches it from the program (on the CPU that
    # JIT-compiles it): a call that wants no state sequences takes the
    # final-state pair, and the pair that writes sequences is bound only
    # when a call wants them. (A threshold of its own: a program no other
    # call of this process has bound kernels of.)
    threshold = 1.0625

    def go():
        c = flexsn.FlexSN(lif(v_th=threshold), 1, 1, backend=device.type)
        x = torch.randn(5, 3, 4, device=device, requires_grad=True)
        c(x).sum().backward()
        prep = _prep(c)
        fetched = {name for name, _ in prep._program._entries}
        assert not any(n.startswith("core_") and not n.endswith("_final")
                       for n in fetched), fetched
        assert {"core_forward_final", "core_backward_final"} <= fetched, fetched
        c.reset()
        c.store_state_seqs = True
        s = c(x)
        s.sum().backward()
        fetched = {name for name, _ in prep._program._entries}
        assert {"core_forward", "core_backward"} <= fetched, fetched
        assert len(c.state_seqs[0]) == 5
    go()


def _saved_ptrs(fn):
    """Runs `fn` under a saved-tensor hook; returns the data pointers of
    the tensors autograd saved, and fn's result."""
    ptrs = []

    def pack(t):
        ptrs.append(t.data_ptr())
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    return ptrs, out


def test_lif_f32_runs_the_final_pair_and_keeps_only_h(device):
    def go():
        c = flexsn.FlexSN(lif(), 1, 1, backend=device.type)
        r = flexsn.FlexSN(lif(), 1, 1, backend="torch")
        x = (torch.randn(7, 4, 5, device=device) * 2).requires_grad_()
        xr = x.detach().clone().requires_grad_()
        ptrs, s = _saved_ptrs(lambda: c(x))
        prep = _prep(c)
        assert prep.final is not None, "the compiler built no final-state pair"
        assert prep.final.leaf_read == [False, False], prep.final.leaf_read
        assert x.data_ptr() not in ptrs, "the node kept the input alive"
        sr = r(xr)
        assert_close(s, sr)
        assert_close(c.states[0], r.states[0], what="final state")
        g = torch.randn_like(s)
        s.backward(g)
        sr.backward(g)
        assert_close(x.grad, xr.grad, what="x.grad")
    go()


def test_final_state_gradient_across_calls(device):
    """Two calls, the second from the first's final state (not detached),
    the loss on both outputs and on the last state: the final state's
    gradient reaches the first call (grad_final_state) and the given
    initial state."""
    def go():
        c = flexsn.FlexSN(lif(), 1, 1, backend=device.type)
        r = flexsn.FlexSN(lif(), 1, 1, backend="torch")
        g = torch.Generator().manual_seed(3)
        xs = [torch.randn(5, 6, generator=g).to(device) * 2 for _ in range(2)]
        v0 = torch.randn(6, generator=g).to(device)
        grads = []
        for m in (c, r):
            a, b = (t.clone().requires_grad_() for t in xs)
            v = v0.clone().requires_grad_()
            m.states = [v]
            s1 = m(a)
            s2 = m(b)
            loss = (s1 * 1.5).sum() + (s2 * torch.arange(6., device=device)).sum() \
                + (m.states[0] ** 2).sum()
            loss.backward()
            grads.append((a.grad, b.grad, v.grad))
        for got, want, what in zip(grads[0], grads[1], ["x1", "x2", "v0"]):
            assert_close(got, want, what=f"{what}.grad")
    go()


def test_state_sequences_run_the_sequence_pair(device):
    """store_state_seqs: the sequence pair, whose backward takes the state
    sequences' gradients; the loss reads the membrane sequence."""
    def go():
        c = flexsn.FlexSN(lif(), 1, 1, backend=device.type, store_state_seqs=True)
        r = flexsn.FlexSN(lif(), 1, 1, backend="torch", store_state_seqs=True)
        x = torch.randn(6, 9, device=device) * 2
        got = []
        for m in (c, r):
            xx = x.clone().requires_grad_()
            s = m(xx)
            (s.sum() + (m.state_seqs[0] * 0.5).sum()).backward()
            got.append((s, m.state_seqs[0], xx.grad))
        assert_close(got[0][0], got[1][0])
        assert_close(got[0][1], got[1][1], what="state sequence")
        assert_close(got[0][2], got[1][2], what="x.grad")
    go()


def test_rematerializing_cores_keep_their_sequences_in_the_final_pair(device):
    """Where the cut keeps rematerializing (bf16 storage: a saved f32 value
    costs more than the bf16 input and state; the tutorial core: its
    backward needs its states), the final-state pair's forward writes the
    state sequences the backward reads besides the final states, and its
    backward takes the final states' gradients: outputs, final states and
    every gradient (through the final states too) equal the sequence
    pair's, bit for bit."""
    torch.manual_seed(3)
    cases = [(lif(), 1, 1, 1, torch.bfloat16), (tutorial(), 2, 2, 2, torch.float32)]
    for core, n_in, n_st, n_out, dtype in cases:
        m = flexsn.FlexSN(core, n_in, n_st, n_out, backend=device.type)
        xs = [(torch.randn(5, 8, device=device) * 2).to(dtype) for _ in range(n_in)]
        s0 = [torch.randn(8, device=device).to(dtype) for _ in range(n_st)]
        out = m(*[x.clone().requires_grad_() for x in xs])
        sum(o.float().sum() for o in (out if isinstance(out, tuple) else (out,))).backward()
        prep = _prep(m)
        final = prep.final
        assert final is not None
        assert {("state_seq", s) for s in range(n_st)} & set(final.forward.result_keys)
        got = []
        for pair in (final, prep.seqs):
            leaves = [t.clone().requires_grad_() for t in xs + s0]
            outs, states = pair.run(leaves)
            finals = states if pair is final else [q[-1] for q in states]
            loss = sum((o.float() * (k + 2)).sum() for k, o in enumerate(outs)) + \
                sum((f.float() ** 2).sum() for f in finals)
            loss.backward()
            got.append([t.detach() for t in outs + finals] + [t.grad for t in leaves])
        assert got[0][-len(xs + s0)] is not None  # the inputs' gradients
        for a, b in zip(*got):
            assert (a is None) == (b is None)
            assert a is None or torch.equal(a, b)


@pytest.mark.parametrize("want_seqs", [False, True])
def test_torch_compile_ops_run_the_policy(device, want_seqs):
    """The torch.compile ops run the same pairs: without state sequences
    the final-state pair, whose autograd formula keeps neither the input
    nor a state sequence (a one-element tensor expanded to the input's
    shape stands in for it); gradients equal the torch loop's, through the
    final state too."""
    from flexsn import _ops
    m = flexsn.FlexSN(lif(), 1, 1, backend=device.type)
    x = (torch.randn(5, 6, device=device) * 2).requires_grad_()
    v0 = torch.randn(6, device=device).requires_grad_()
    ptrs, (outs, seqs, finals) = _saved_ptrs(
        lambda: _ops.run(m.kernel.compiled, [x], [v0], [], want_seqs=want_seqs))
    assert (x.data_ptr() in ptrs) is False
    assert (seqs is None) is not want_seqs
    loss = (outs[0] * 2).sum() + (finals[0] ** 2).sum()
    if want_seqs:
        loss = loss + seqs[0].sum()
    loss.backward()
    r = flexsn.FlexSN(lif(), 1, 1, backend="torch", store_state_seqs=want_seqs)
    xr, vr = (t.detach().clone().requires_grad_() for t in (x, v0))
    r.states = [vr]
    sr = r(xr)
    ref = (sr * 2).sum() + (r.states[0] ** 2).sum()
    if want_seqs:
        ref = ref + r.state_seqs[0].sum()
    ref.backward()
    assert_close(x.grad, xr.grad, what="x.grad through the ops")
    assert_close(v0.grad, vr.grad, what="v0.grad through the ops")


def test_final_pair_under_compiled_autograd_and_save_on_cpu(device):
    """The final-state pair's node (the input not kept: its shape travels
    in the node's saved data) under compiled autograd and under a hook that
    copies what it saves; both give the plain backward's gradients."""
    import torch._dynamo.compiled_autograd as ca

    def grads(mode):
        m = flexsn.FlexSN(lif(), 1, 1, backend=device.type)
        g = torch.Generator().manual_seed(5)
        x = (torch.randn(6, 2, 5, generator=g) * 2).to(device).requires_grad_()
        v0 = torch.randn(2, 5, generator=g).to(device).requires_grad_()
        m.states = [v0]
        if mode == "save_on_cpu":
            with torch.autograd.graph.save_on_cpu(pin_memory=True):
                s = m(x)
        else:
            s = m(x)
        loss = (s * 2).sum() + (m.states[0] ** 2).sum()
        if mode == "compiled":
            with ca._enable(torch.compile(backend="aot_eager")):
                loss.backward()
        else:
            loss.backward()
        assert _prep(m).final is not None
        return [x.grad, v0.grad]

    def go():
        torch._dynamo.reset()
        ref = grads("plain")
        for mode in ("compiled", "save_on_cpu"):
            for a, b, what in zip(grads(mode), ref, ["x", "v0"]):
                assert_close(a, b, what=f"{mode}: {what}.grad")
        torch._dynamo.reset()
    go()
