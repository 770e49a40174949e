"""flexsn.recompute_states(): a training call keeps for its backward only
what its forward read, and the backward runs the forward kernel again for
the state sequences and saved values; outputs, states and every gradient
are bit for bit those without it."""

import contextlib
import datetime
import gc

import pytest
import torch
from torch import nn

import flexsn
from cores import tutorial


def _saved_bytes(fn):
    """fn()'s result and the bytes autograd saved while it ran."""
    total = [0]

    def pack(t):
        total[0] += t.numel() * t.element_size()
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    return out, total[0]


def _run(make, x, g, ctx, **call):
    """Outputs, final states, input and parameter gradients and saved bytes
    of a fresh module's training call inside ctx."""
    m = make().to(x.device)
    xi = x.clone().requires_grad_()
    with ctx():
        out, saved = _saved_bytes(lambda: m(xi))
    out = out if isinstance(out, tuple) else (out,)
    sum((o.float() * g).sum() for o in out).backward()
    params = [p.grad.clone() for p in m.parameters() if p.grad is not None]
    states = [m.v.clone()]
    return [o.detach() for o in out], states, xi.grad, params, saved


def _lif():
    return flexsn.neuron.LIFNode(step_mode="m")


def _plif():
    return flexsn.neuron.ParametricLIFNode(step_mode="m")


def _tutorial():
    return flexsn.FlexSN(tutorial(), num_inputs=2, num_states=2, num_outputs=2,
                         step_mode="m")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("make", [_lif, _plif], ids=["lif", "plif"])
def test_exact_and_smaller(device, dtype, make):
    torch.manual_seed(0)
    x = (torch.randn(6, 4, 37, device=device) * 2).to(dtype)
    g = torch.randn(6, 4, 37, device=device)
    want = _run(make, x, g, contextlib.nullcontext)
    got = _run(make, x, g, flexsn.recompute_states)
    for a, b in zip(got[:2], want[:2]):
        assert all(torch.equal(p, q) for p, q in zip(a, b))
    assert torch.equal(got[2], want[2])
    assert len(got[3]) == len(want[3]) and \
        all(torch.equal(p, q) for p, q in zip(got[3], want[3]))
    if dtype == torch.bfloat16:
        # kept: the input and the state sequence, or the input alone
        assert got[4] < 0.6 * want[4]
    else:  # h, or the input: one sequence either way
        assert got[4] <= want[4]


def test_two_inputs_two_states(device):
    """A core with two inputs and two states (the tutorial's), its state
    sequences wanted: the same sequences, outputs and gradients."""
    torch.manual_seed(1)
    x = torch.randn(5, 3, 8, device=device)
    g = torch.randn(5, 3, 8, device=device)

    def make():
        m = _tutorial()
        m.store_state_seqs = True
        return m

    def run(ctx):
        m = make().to(device)
        a, b = x.clone().requires_grad_(), (x * 0.5).requires_grad_()
        with ctx():
            outs = m(a, b)
        seqs = [q.detach().clone() for q in m.state_seqs]
        sum((o * g).sum() for o in outs).backward()
        return [o.detach() for o in outs], seqs, a.grad, b.grad
    want, got = run(contextlib.nullcontext), run(flexsn.recompute_states)
    for p, q in zip(got, want):
        if isinstance(p, list):
            assert all(torch.equal(u, v) for u, v in zip(p, q))
        else:
            assert torch.equal(p, q)


def test_backward_after_the_context():
    """The node is made inside the context; its backward may run after."""
    torch.manual_seed(2)
    x = torch.randn(4, 2, 9, dtype=torch.bfloat16)
    n = _lif()
    xi = x.clone().requires_grad_()
    with flexsn.recompute_states():
        out = n(xi)
    out.float().sum().backward()
    n.reset()
    xr = x.clone().requires_grad_()
    n(xr).float().sum().backward()
    assert torch.equal(xi.grad, xr.grad)


def test_plans_follow_the_context(monkeypatch):
    """A module's fast-path plan is recorded per side of the context: one
    made outside (its node keeps the sequences) is not taken inside, and
    inside, the second call runs through the plan the first left."""
    from flexsn import _runner
    general = []
    real = _runner.run_compiled

    def spy(*args, **kwargs):
        general.append(True)
        return real(*args, **kwargs)
    monkeypatch.setattr(_runner, "run_compiled", spy)
    torch.manual_seed(3)
    n = _lif()
    x = torch.randn(4, 2, 16, dtype=torch.bfloat16)
    sizes, paths = [], []
    for ctx in (contextlib.nullcontext, contextlib.nullcontext, flexsn.recompute_states,
                flexsn.recompute_states, contextlib.nullcontext):
        n.reset()
        xi = x.clone().requires_grad_()
        general.clear()
        with ctx():
            out, saved = _saved_bytes(lambda: n(xi))
        out.float().sum().backward()
        sizes.append(saved)
        paths.append("general" if general else "plan")
    assert paths == ["general", "plan", "general", "plan", "general"]
    assert sizes[0] == sizes[1] == sizes[4]
    assert sizes[2] == sizes[3] < sizes[0]


def test_under_torch_compile():
    """Compiled inside and outside the context: one graph each (Dynamo
    guards on it), the same results, and inside fewer saved bytes (bf16)."""
    torch.manual_seed(4)
    net = nn.Sequential(nn.Linear(6, 16), _lif(), nn.Linear(16, 3))
    x = torch.randn(5, 4, 6)
    torch._dynamo.reset()
    compiled = torch.compile(net)

    def step(ctx):
        for m in net.modules():
            if isinstance(m, flexsn.FlexSN):
                m.reset()
        net.zero_grad(set_to_none=True)
        with ctx(), torch.autocast("cpu", dtype=torch.bfloat16):
            loss, saved = _saved_bytes(lambda: compiled(x).float().pow(2).mean())
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in net.parameters()], saved
    want = step(contextlib.nullcontext)
    got = step(flexsn.recompute_states)
    again = step(contextlib.nullcontext)
    assert torch.equal(got[0], want[0])
    assert all(torch.equal(a, b) for a, b in zip(got[1], want[1]))
    assert got[2] < want[2] and again[2] == want[2]


_CACHED_CHILD = """
import sys, torch, flexsn
from torch import nn
torch.manual_seed(0)
net = nn.Sequential(nn.Linear(6, 16), flexsn.neuron.LIFNode(step_mode='m'), nn.Linear(16, 3))
compiled = torch.compile(net)
x = torch.randn(5, 4, 6)
ops = flexsn._native.ops()

def launches(ctx):
    net[1].reset()
    ops.trace(True)
    with ctx(), torch.autocast('cpu', dtype=torch.bfloat16):
        loss = compiled(x).float().pow(2).mean()
    loss.backward()
    log, n, i = ops.trace(False), 0, 0
    while i < len(log):  # per launch: id, pointer count, a flag per pointer
        n, i = n + 1, i + 2 + log[i + 1]
    return n
import contextlib
order = [flexsn.recompute_states, contextlib.nullcontext][::int(sys.argv[1])]
print('launches', *[launches(ctx) for ctx in order])
"""


def test_compiled_graphs_mean_the_same_in_every_process(tmp_path):
    """PyTorch's caches reuse a compiled graph across processes by its
    text, and the graph names each training binding by an integer: one
    process's plain call and the next process's first call inside
    recompute_states() must not read as the same graph (the recomputing
    backward launches the forward kernel once more)."""
    import subprocess
    from conftest import child_python
    argv, env = child_python()
    env.update(TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"),
               TORCHINDUCTOR_FX_GRAPH_CACHE="1", TORCHINDUCTOR_AUTOGRAD_CACHE="1")

    def child(order):
        r = subprocess.run(argv + ["-c", _CACHED_CHILD, order], env=env, capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        return [int(v) for v in r.stdout.split("launches", 1)[1].split()]
    plain_first = child("-1")  # plain, then recomputing; fills the cache
    recompute_first = child("1")  # recomputing, then plain; from the cache
    assert plain_first[1] == plain_first[0] + 1
    assert recompute_first == plain_first[::-1]


def test_compiled_final_states_free_their_sequences():
    """Under torch.compile inside the context, a final state the call keeps
    (the module's v) is a step of its own (the final-state pair writes it),
    not a view holding the whole state sequence, and a loss on it sends its
    gradient back as without the context."""
    torch.manual_seed(6)
    net = nn.Sequential(nn.Linear(6, 16), _lif(), nn.Linear(16, 3))
    lif = net[1]
    x = torch.randn(5, 4, 6)
    torch._dynamo.reset()
    compiled = torch.compile(net)

    def step(ctx):
        lif.reset()
        net.zero_grad(set_to_none=True)
        with ctx(), torch.autocast("cpu", dtype=torch.bfloat16):
            out = compiled(x)
            final = lif.v
            loss = out.float().pow(2).mean() + final.float().pow(2).sum()
        loss.backward()
        return final, loss.detach(), [p.grad.clone() for p in net.parameters()]
    want = step(contextlib.nullcontext)
    got = step(flexsn.recompute_states)
    step_bytes = got[0].numel() * got[0].element_size()
    assert got[0].untyped_storage().nbytes() == step_bytes
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    assert all(torch.equal(a, b) for a, b in zip(got[2], want[2]))


def test_converted_spikingjelly_cnn():
    """A converted SpikingJelly conv-BN-LIF network under bf16 autocast:
    loss and gradients unchanged, fewer bytes saved."""
    pytest.importorskip("spikingjelly")
    from spikingjelly.activation_based import functional, layer, neuron
    torch.manual_seed(5)
    net = nn.Sequential(layer.Conv2d(2, 4, 3, padding=1), layer.BatchNorm2d(4),
                        neuron.LIFNode(), layer.Flatten(), layer.Linear(4 * 6 * 6, 3))
    functional.set_step_mode(net, "m")
    net = flexsn.convert(net)
    x = torch.rand(4, 2, 2, 6, 6) * 3

    def step(ctx):
        functional.reset_net(net)
        net.zero_grad(set_to_none=True)
        with ctx(), torch.autocast("cpu", dtype=torch.bfloat16):
            loss, saved = _saved_bytes(lambda: net(x).float().mean(0).pow(2).sum())
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in net.parameters()], saved
    want, got = step(contextlib.nullcontext), step(flexsn.recompute_states)
    assert torch.equal(got[0], want[0])
    assert all(torch.equal(a, b) for a, b in zip(got[1], want[1]))
    assert got[2] < want[2]


@pytest.mark.filterwarnings("ignore:Dynamo does not know how to trace the builtin")
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_ddp(tmp_path, compiled):
    import copy

    import torch.distributed as dist
    if not dist.is_available():
        pytest.skip("torch.distributed is not available")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/rendezvous",
                            rank=0, world_size=1, timeout=datetime.timedelta(seconds=60))
    try:
        torch.manual_seed(6)
        net = nn.Sequential(nn.Linear(6, 16), _lif(), nn.Linear(16, 3))
        ddp = nn.parallel.DistributedDataParallel(copy.deepcopy(net))
        if compiled:
            torch._dynamo.reset()
            ddp = torch.compile(ddp)
        x = torch.randn(5, 4, 6)
        results = []
        for model, ctx in ((net, contextlib.nullcontext), (ddp, flexsn.recompute_states)):
            for m in model.modules():
                if isinstance(m, flexsn.FlexSN):
                    m.reset()
            model.zero_grad(set_to_none=True)
            with ctx(), torch.autocast("cpu", dtype=torch.bfloat16):
                loss = model(x).float().pow(2).mean()
            loss.backward()
            results.append((loss.detach(), [p.grad.clone() for p in model.parameters()]))
        (l0, g0), (l1, g1) = results
        assert torch.equal(l0, l1)
        assert all(torch.equal(a, b) for a, b in zip(g0, g1))
    finally:
        # the reducer and Dynamo's wrapper before the group (see
        # test_compact_spikes.test_ddp)
        ddp = None
        torch._dynamo.reset()
        gc.collect()
        dist.destroy_process_group()


def test_input_changed_in_place_is_refused():
    """The backward reruns the forward on the saved input: an input written
    in place after the forward raises autograd's error instead of giving
    gradients of other values."""
    n = _lif()
    x = torch.randn(4, 2, 8, requires_grad=True)
    y = x * 2  # the neuron's input, an intermediate the caller then changes
    with flexsn.recompute_states():
        out = n(y)
    y.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()

