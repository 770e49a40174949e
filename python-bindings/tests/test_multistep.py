"""flexsn.multistep against the loop it replaces: the same network called a
step at a time. Outputs, the neurons' final states (a second call continues
where the loop would), and the gradients of the input and every parameter;
then the steps it must run step by step, with a warning."""

import copy
import pickle
import warnings

import pytest
import torch
from torch import nn

import flexsn

snn = pytest.importorskip("snntorch")
nt = pytest.importorskip("norse.torch")
from snntorch import surrogate as ss  # noqa: E402
from snntorch import utils as su  # noqa: E402

RTOL, ATOL = 1e-5, 1e-5


def _loop(step, xs, state=None, with_state=False):
    outs = []
    for t in range(xs.shape[0]):
        if with_state:
            o, state = step(xs[t], state)
        else:
            o = step(xs[t])
        outs.append(o)
    if isinstance(outs[0], tuple):
        out = tuple(torch.stack([o[k] for o in outs]) for k in range(len(outs[0])))
    else:
        out = torch.stack(outs)
    return (out, state) if with_state else out


def _flat(r):
    if isinstance(r, torch.Tensor):
        return [r]
    return [t for v in r for t in _flat(v)]


def _close(got, want, scale_atol=False):
    for g, w in zip(_flat(got), _flat(want)):
        atol = ATOL * max(1.0, w.abs().max().item()) if scale_atol else ATOL
        torch.testing.assert_close(g, w, rtol=RTOL, atol=atol)


def _check_against_loop(make, x, reset=None, calls=2):
    """multistep(copy) over x, twice, against the loop over x, twice."""
    ref = make().to(x.device)
    ours = copy.deepcopy(ref)
    ms = flexsn.multistep(ours)
    if reset is not None:
        reset(ref)
        reset(ours)
    xr, xo = x.clone().requires_grad_(), x.clone().requires_grad_()
    with warnings.catch_warnings():
        warnings.simplefilter("error", flexsn.StepByStepWarning)
        for _ in range(calls):  # the second call continues from the states
            want, got = _loop(ref, xr), ms(xo)
            _close(got, want)
    ws = [torch.randn_like(w) for w in _flat(want)]
    lw = sum((w * k).sum() for w, k in zip(_flat(want), ws))
    lg = sum((g * k).sum() for g, k in zip(_flat(got), ws))
    gw = torch.autograd.grad(lw, [xr, *ref.parameters()])
    gg = torch.autograd.grad(lg, [xo, *ms.parameters()])
    _close(gg, gw, scale_atol=True)
    return ref, ours, ms


def _tutorial7():
    """snnTorch tutorial 7's network (N-MNIST shapes)."""
    grad = ss.atan()
    return nn.Sequential(
        nn.Conv2d(2, 12, 5), nn.MaxPool2d(2),
        snn.Leaky(beta=0.5, spike_grad=grad, init_hidden=True),
        nn.Conv2d(12, 32, 5), nn.MaxPool2d(2),
        snn.Leaky(beta=0.5, spike_grad=grad, init_hidden=True),
        nn.Flatten(), nn.Linear(32 * 5 * 5, 10),
        snn.Leaky(beta=0.5, spike_grad=grad, init_hidden=True, output=True))


def test_snntorch_sequential_init_hidden(device):
    torch.manual_seed(0)
    x = (torch.rand(6, 3, 2, 34, 34, device=device) > 0.7).float()
    ref, ours, ms = _check_against_loop(_tutorial7, x, reset=su.reset)
    for a, b in zip(ref.modules(), ours.modules()):
        if isinstance(a, snn.Leaky):
            torch.testing.assert_close(b.mem, a.mem, rtol=RTOL, atol=ATOL)
    assert isinstance(ours[2], snn.Leaky) and isinstance(ours[2], flexsn.snntorch.Leaky)
    assert list(ms.state_dict()) == list(ref.state_dict())
    su.reset(ms)  # snnTorch's helper finds the neurons
    assert not ours[2].mem.any()


class _Tutorial5Step(nn.Module):
    """Tutorial 5's network, one step per call, its membranes kept in
    attributes from step to step."""

    def __init__(self):
        super().__init__()
        self.fc1, self.lif1 = nn.Linear(784, 100), snn.Leaky(beta=0.95)
        self.fc2, self.lif2 = nn.Linear(100, 10), snn.Synaptic(alpha=0.9, beta=0.8)
        self.reset()

    def reset(self):  # after .to(device): snnTorch makes states where these are
        self.mem1 = self.lif1.init_leaky()
        self.syn2, self.mem2 = self.lif2.init_synaptic()

    def forward(self, x):
        spk1, self.mem1 = self.lif1(self.fc1(x), self.mem1)
        spk2, self.syn2, self.mem2 = self.lif2(self.fc2(spk1), self.syn2, self.mem2)
        return spk2, self.mem2


def test_snntorch_states_through_attributes(device):
    torch.manual_seed(1)
    x = torch.rand(5, 4, 784, device=device) * 2
    ref, ours, _ = _check_against_loop(_Tutorial5Step, x, reset=_Tutorial5Step.reset)
    for k in ("mem1", "syn2", "mem2"):
        torch.testing.assert_close(getattr(ours, k), getattr(ref, k), rtol=RTOL, atol=ATOL)


def test_states_only_stored_are_scanned_as_final_states():
    """A neuron whose states the step only stores in attributes (tutorial
    5's lif1) runs the scan that writes final states and no state sequence;
    one whose state the step also returns (lif2's mem2) writes sequences."""
    ms = flexsn.multistep(_Tutorial5Step())
    ms(torch.rand(3, 2, 784))
    (program,) = ms._programs.values()
    kinds = {type(target).__name__: kind for _, op, target, kind, *_ in program.plan
             if op == "call_module" and kind}
    assert kinds == {"Leaky": "snntorch-final", "Synaptic": "snntorch"}, kinds
    step = _NorseStep()
    flexsn.multistep(step)(torch.rand(3, 2, 6))
    assert step.s is not None


def test_snntorch_neuron_alone(device):
    torch.manual_seed(2)
    x = torch.randn(7, 3, 5, device=device) + 0.5
    _check_against_loop(lambda: snn.RLeaky(beta=0.9, all_to_all=False, V=0.5), x)
    _check_against_loop(lambda: flexsn.from_snntorch(snn.Alpha(alpha=0.9, beta=0.8)), x)


def test_norse_sequential_state(device):
    torch.manual_seed(3)
    make = lambda: nt.SequentialState(  # noqa: E731
        nn.Linear(6, 8), nt.LIFCell(nt.LIFParameters(v_th=torch.tensor(0.3))),
        nn.Linear(8, 4), nt.LICell())
    x = torch.randn(9, 3, 6, device=device) * 4
    ref = make().to(device)
    ours = copy.deepcopy(ref)
    ms = flexsn.multistep(ours)
    xr, xo = x.clone().requires_grad_(), x.clone().requires_grad_()
    state_r = state_o = None
    with warnings.catch_warnings():
        warnings.simplefilter("error", flexsn.StepByStepWarning)
        for _ in range(2):  # the state returned continues the sequence
            want, state_r = _loop(ref, xr, state_r, with_state=True)
            got, state_o = ms(xo, state_o)
            _close(got, want)
            for a, b in zip(state_r, state_o):
                if a is not None:
                    _close(b, a)
    gw = torch.autograd.grad(want.sum(), [xr, *ref.parameters()])
    gg = torch.autograd.grad(got.sum(), [xo, *ours.parameters()])
    _close(gg, gw, scale_atol=True)


class _NorseStep(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.cell = nn.Linear(6, 5), nt.LIFBoxCell()
        self.s = None

    def forward(self, x):
        z, self.s = self.cell(self.fc(x) * 30, self.s)
        return z


def test_norse_cell_in_a_step_module(device):
    torch.manual_seed(4)
    x = torch.randn(8, 2, 6, device=device)
    ref, ours, _ = _check_against_loop(_NorseStep, x)
    torch.testing.assert_close(ours.s.v, ref.s.v, rtol=RTOL, atol=ATOL)


def test_norse_cell_alone(device):
    x = torch.randn(8, 2, 6, device=device) * 40 + 10
    cell = nt.LIFCell()
    want, sw = _loop(cell, x, with_state=True)
    got, sg = flexsn.multistep(cell)(x)
    _close(got, want)
    _close(sg, sw)
    with pytest.raises(TypeError, match="takes \\[T, ...\\] already"):
        flexsn.multistep(nt.LIF())(x)


def _spikingjelly_net():
    sj = pytest.importorskip("spikingjelly.activation_based")
    from spikingjelly.activation_based import layer, neuron
    return nn.Sequential(layer.Conv2d(2, 4, 3, padding=1), layer.BatchNorm2d(4),
                         neuron.LIFNode(), layer.Flatten(), layer.Linear(4 * 8 * 8, 5),
                         neuron.IFNode()), sj


def test_spikingjelly_step_mode_s_and_per_step_batch_norm(device):
    """A converted SpikingJelly network in step mode s; its BatchNorm in
    training mode uses each step's statistics and updates the running ones
    T times, as the loop does."""
    torch.manual_seed(5)
    x = torch.randn(5, 3, 2, 8, 8, device=device)
    make = lambda: flexsn.convert(_spikingjelly_net()[0])  # noqa: E731
    _, sj = _spikingjelly_net()
    ref, ours, ms = _check_against_loop(make, x, reset=sj.functional.reset_net)
    torch.testing.assert_close(ours[1].running_mean, ref[1].running_mean)
    torch.testing.assert_close(ours[1].running_var, ref[1].running_var)
    assert int(ours[1].num_batches_tracked) == int(ref[1].num_batches_tracked) == 10
    torch.testing.assert_close(ours[2].v, ref[2].v, rtol=RTOL, atol=ATOL)
    sj.functional.reset_net(ms)
    assert ours[2].step_mode == "s"


def test_batch_norm_folded_is_explicit(device):
    torch.manual_seed(6)
    bn = nn.BatchNorm1d(4).to(device)
    x = torch.randn(6, 8, 4, device=device) + torch.arange(6., device=device).view(6, 1, 1)
    per_step = flexsn.multistep(copy.deepcopy(bn))(x)
    folded = flexsn.multistep(copy.deepcopy(bn), batch_norm="folded")(x)
    torch.testing.assert_close(per_step, torch.stack([bn(x[t]) for t in range(6)]))
    torch.testing.assert_close(folded, nn.BatchNorm1d(4).to(device)(x.flatten(0, 1))
                               .unflatten(0, (6, 8)))
    with pytest.raises(ValueError, match="batch_norm"):
        flexsn.multistep(bn, batch_norm="sometimes")


def test_flexsn_modules_and_arbitrary_ops(device):
    """Operations that are not per-sample layers run under vmap over time:
    a per-step mean, a view by the step's batch size."""

    class Step(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(6, 6)
            self.n = flexsn.neuron.LIFNode(step_mode="s")

        def forward(self, x):
            y = self.fc(x)
            y = y - y.mean()  # the mean of this step only
            y = y.view(x.size(0), 2, 3).flatten(1)
            return self.n(y * 3)

    torch.manual_seed(7)
    _check_against_loop(Step, torch.randn(6, 4, 6, device=device))


class _DataDependent(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.lif = nn.Linear(3, 3), snn.Leaky(beta=0.9, init_hidden=True)

    def forward(self, x):
        y = self.fc(x)
        if y.sum() > 0:
            y = -y
        return self.lif(y)


class _Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.t = nn.Linear(3, 3), 0

    def forward(self, x):
        self.t += 1
        return self.fc(x) * self.t


class _PreviousOutput(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.prev = nn.Linear(3, 3), torch.zeros(3)

    def forward(self, x):
        y = self.fc(x) + self.prev
        self.prev = y
        return y


class _FreshNorseCell(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nt.LIFCell()

    def forward(self, x):
        return self.cell(x * 50)[0]


class _CalledTwice(nn.Module):
    def __init__(self):
        super().__init__()
        self.lif = snn.Leaky(beta=0.9, init_hidden=True)

    def forward(self, x):
        return self.lif(self.lif(x))


@pytest.mark.parametrize("make,reason", [
    (_DataDependent, "control flow"),
    (_Counter, "_Counter.t"),
    (_PreviousOutput, "_PreviousOutput.prev"),
    (_FreshNorseCell, "afresh"),
    (_CalledTwice, "called twice"),
    (lambda: nn.Sequential(nn.Linear(3, 3), snn.RLeaky(beta=0.9, linear_features=3,
                                                         init_hidden=True)), "all_to_all"),
])
def test_steps_it_cannot_reorder_run_step_by_step(make, reason):
    torch.manual_seed(8)
    ref = make()
    ours = copy.deepcopy(ref)
    x = torch.randn(5, 2, 3)
    want = _loop(ref, x)
    with pytest.warns(flexsn.StepByStepWarning, match=reason):
        got = flexsn.multistep(ours)(x)
    _close(got, want)


def test_bad_calls():
    ms = flexsn.multistep(nn.Sequential(nn.Linear(3, 3), snn.Leaky(0.9, init_hidden=True)))
    with pytest.raises(ValueError, match="T = 0"):
        ms(torch.zeros(0, 2, 3))
    with pytest.raises(ValueError, match="first \\(time\\) dimension"):
        flexsn.multistep(nn.Bilinear(3, 3, 2))(torch.zeros(4, 2, 3), torch.zeros(5, 2, 3))
    with pytest.raises(TypeError, match="nn.Module"):
        flexsn.multistep(lambda x: x)
    with pytest.raises(TypeError, match="already"):
        flexsn.multistep(ms)


def test_pickle_deepcopy_and_compile():
    torch.manual_seed(9)
    net = nn.Sequential(nn.Linear(4, 6), snn.Leaky(beta=0.8, init_hidden=True),
                        nn.Linear(6, 2), snn.Leaky(beta=0.7, init_hidden=True, output=True))
    ms = flexsn.multistep(net)
    x = torch.randn(6, 3, 4) + 0.3
    su.reset(ms)
    want = ms(x)
    su.reset(ms)  # states that carry a graph do not copy, as in snnTorch
    for other in (pickle.loads(pickle.dumps(ms)), copy.deepcopy(ms)):
        su.reset(ms)
        su.reset(other)
        _close(other(x), want)
        assert list(other.state_dict()) == list(net.state_dict())
    su.reset(ms)
    compiled = torch.compile(ms, backend="aot_eager", fullgraph=True)
    _close(compiled(x), want)


def test_multistep_of_a_converted_neuron_equals_forward_sequence():
    lif = flexsn.from_snntorch(snn.Synaptic(alpha=0.6, beta=0.9))
    x = torch.randn(7, 2, 3) + 0.5
    a = flexsn.multistep(lif)(x)
    lif.init_synaptic()
    b = lif.forward_sequence(x)
    _close(a, b)


def test_autocast_bf16(device):
    """Under autocast the layers run in bf16 and the neurons scan bf16
    sequences; the loop gives the same spikes up to bf16 rounding."""
    torch.manual_seed(10)
    net = nn.Sequential(nn.Linear(8, 16), snn.Leaky(beta=0.8, init_hidden=True),
                        nn.Linear(16, 4), snn.Leaky(beta=0.8, init_hidden=True, output=True))
    net = net.to(device)
    ref = copy.deepcopy(net)
    ms = flexsn.multistep(net)
    x = torch.randn(6, 5, 8, device=device)
    with torch.autocast(device.type, dtype=torch.bfloat16):
        su.reset(ms)
        spk, mem = ms(x)
        su.reset(ref)
        want = _loop(ref, x)
    assert mem.dtype == torch.bfloat16
    torch.testing.assert_close(mem.float(), want[1].float(), rtol=2e-2, atol=2e-2)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_graph_replay():
    """A training step through multistep, captured in a CUDA graph and
    replayed, gives the eager step's loss and gradients."""
    torch.manual_seed(11)
    dev = torch.device("cuda")
    net = _tutorial7().to(dev)
    ms = flexsn.multistep(net)
    x = (torch.rand(5, 4, 2, 34, 34, device=dev) > 0.8).float()

    def step():
        su.reset(ms)
        for p in ms.parameters():
            p.grad = None
        loss = ms(x)[1].square().mean()
        loss.backward()
        return loss

    # every eager call on the capturing stream, as PyTorch's whole-network
    # capture asks: autograd runs the backward on the forward's stream
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        want = step().detach().clone()
        grads = [p.grad.clone() for p in ms.parameters()]
        for _ in range(2):
            step()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        got = step()
    torch.cuda.current_stream().wait_stream(side)
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(got, want)
    for p, g in zip(ms.parameters(), grads):
        torch.testing.assert_close(p.grad, g, rtol=1e-4, atol=1e-5)


def test_interop_page_runs():
    """docs/interop.md's Python blocks, in order, as one program."""
    import re
    from pathlib import Path
    text = (Path(__file__).parents[2] / "docs" / "interop.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 3
    scope = {"__name__": "interop_page"}
    with warnings.catch_warnings():
        warnings.simplefilter("error", flexsn.StepByStepWarning)
        warnings.simplefilter("error", flexsn.LoopWarning)  # its loops all roll
        exec(compile("\n".join(blocks), "docs/interop.md", "exec"), scope)  # noqa: S102


DDP_RANK = r"""
import sys, torch, torch.distributed as dist
from torch import nn
sys.path.insert(0, {tests!r})
import flexsn
from test_multistep import _Tutorial5Step
rank, backend = int(sys.argv[1]), {backend!r}
device = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")
if device.type == "cuda":
    torch.cuda.set_device(device)
dist.init_process_group(backend, init_method="file://{rendezvous}", rank=rank, world_size=2)
torch.manual_seed(0)
net = _Tutorial5Step().to(device)
ddp = nn.parallel.DistributedDataParallel(flexsn.multistep(net))
x = torch.rand(6, 4, 784, generator=torch.Generator().manual_seed(1)) * 2
for _ in range(2):  # a second step: the states are reset, the buffers synced again
    net.reset()
    ddp.zero_grad()
    spk, mem = ddp(x[:, 2 * rank:2 * rank + 2].to(device))
    (spk.sum() + mem.square().sum()).backward()
if rank == 0:
    torch.save([p.grad.cpu() for p in net.parameters()], {out!r})
ddp = None
dist.destroy_process_group()
"""

DDP_BACKENDS = [pytest.param("gloo", id="gloo-cpu")]
if torch.cuda.device_count() >= 2:
    DDP_BACKENDS.append(pytest.param("nccl", id="nccl-2gpu", marks=pytest.mark.cuda))


@pytest.mark.parametrize("backend", DDP_BACKENDS)
def test_ddp_two_processes(tmp_path, backend):
    """DistributedDataParallel over flexsn.multistep, two processes (gloo on
    the CPU; NCCL on two GPUs where there are) of two samples each: the
    averaged gradients are half those of the loop over all four samples in
    one process (the loss sums)."""
    import os
    import subprocess
    import torch.distributed as dist
    from conftest import child_python
    if not dist.is_available():
        pytest.skip("torch.distributed is not available")
    tests = os.path.dirname(os.path.abspath(__file__))
    code = DDP_RANK.format(tests=tests, rendezvous=tmp_path / "rendezvous", backend=backend,
                           out=str(tmp_path / "grads.pt"))
    argv, env = child_python()
    ranks = [subprocess.Popen(argv + ["-c", code, str(r)], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for r in (0, 1)]
    outs = [p.communicate(timeout=600) for p in ranks]
    assert all(p.returncode == 0 for p in ranks), [o[1][-2000:] for o in outs]
    got = torch.load(tmp_path / "grads.pt")
    device = torch.device("cuda", 0) if backend == "nccl" else torch.device("cpu")
    torch.manual_seed(0)
    ref = _Tutorial5Step().to(device)
    x = torch.rand(6, 4, 784, generator=torch.Generator().manual_seed(1)) * 2
    ref.reset()
    spk, mem = _loop(ref, x.to(device))
    (spk.sum() + mem.square().sum()).backward()
    # the halves' sums and the whole batch's add in another order
    _close([g * 2 for g in got], [p.grad.cpu() for p in ref.parameters()], scale_atol=True)
