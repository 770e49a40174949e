"""flexsn.backend: torch.compile of a forward that loops over time, with
neurons that run on the package's operators (converted Norse and
SpikingJelly neurons, flexsn's in step mode "s"), rolls each neuron's
per-step calls into one fused scan and gives eager's outputs, states and
gradients: bit for bit with batch_steps=False, and with the layers batched
over the steps as multistep's (a batched product's rounding, 1e-5); a chain
it cannot roll exactly stays as traced, with one LoopWarning."""

import warnings

import pytest
import torch
from torch import nn

import flexsn
from conftest import DEVICES

nt = pytest.importorskip("norse.torch")
sj = pytest.importorskip("spikingjelly.activation_based")


class _NorseLoop(nn.Module):
    """Norse users' loop: ``z, s = cell(x[t], s)`` per step, two layers."""

    def __init__(self, record_states=False):
        super().__init__()
        self.fc1, self.cell1 = nn.Linear(8, 16), flexsn.from_norse(nt.LIFCell())
        self.fc2, self.cell2 = nn.Linear(16, 4), flexsn.from_norse(nt.LIFCell())
        self.record_states = record_states

    def forward(self, x):
        s1 = s2 = None
        outs, vs = [], []
        for t in range(x.shape[0]):
            z1, s1 = self.cell1(self.fc1(x[t]), s1)
            z2, s2 = self.cell2(self.fc2(z1), s2)
            outs.append(z2)
            if self.record_states:
                vs.append(s1.v)
        out = torch.stack(outs)
        return (out, torch.stack(vs)) if self.record_states else (out, s2.v)


class _SpikingJellyLoop(nn.Module):
    """A SpikingJelly single-step network called once per step."""

    def __init__(self):
        super().__init__()
        from spikingjelly.activation_based import neuron
        self.fc1, self.sn1 = nn.Linear(8, 16), neuron.LIFNode()
        self.fc2, self.sn2 = nn.Linear(16, 4), neuron.LIFNode()

    def forward(self, x):
        return torch.stack([self.sn2(self.fc2(self.sn1(self.fc1(x[t]))))
                            for t in range(x.shape[0])])


class _FlexSNLoop(nn.Module):
    """flexsn's own neurons in step mode "s", called once per step."""

    def __init__(self):
        super().__init__()
        self.fc1, self.sn1 = nn.Linear(8, 16), flexsn.neuron.LIFNode(step_mode="s")
        self.fc2, self.sn2 = nn.Linear(16, 4), flexsn.neuron.LIFNode(step_mode="s")

    def forward(self, x):
        return torch.stack([self.sn2(self.fc2(self.sn1(self.fc1(x[t]))))
                            for t in range(x.shape[0])])


def _compiled(model, rolled, batch_steps=False):
    def then(gm, example_inputs):
        rolled.append(gm.meta["flexsn_rolled"])
        return gm.forward
    torch._dynamo.reset()
    return torch.compile(model, backend=flexsn.Backend(then=then, batch_steps=batch_steps))


def _step(model, x, reset):
    """Outputs and the gradients of x and each parameter."""
    x = x.detach().clone().requires_grad_()
    reset()
    outs = model(x)
    loss = sum((o.float() * torch.linspace(0.5, 1.5, o.numel(), device=o.device)
                .view(o.shape)).sum() for o in outs if isinstance(o, torch.Tensor))
    grads = torch.autograd.grad(loss, [x, *model.parameters()], allow_unused=True)
    return [o.detach() for o in outs], grads


def _rolled_and_eager(model, x, reset=lambda: None, batch_steps=False):
    """(compiled step, eager step, how many chains each compile rolled),
    the compile raising on any LoopWarning."""
    want = _step(model, x, reset)
    rolled = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", flexsn.LoopWarning)
        got = _step(_compiled(model, rolled, batch_steps), x, reset)
    return got, want, rolled


def _model(name, device):
    torch.manual_seed(0)
    if name == "norse":
        m = _NorseLoop().to(device)
        return m, lambda: None
    if name == "flexsn":
        m = _FlexSNLoop().to(device)
        return m, lambda: (m.sn1.reset(), m.sn2.reset())
    from spikingjelly.activation_based import functional
    m = _SpikingJellyLoop()
    m = (m if name == "spikingjelly-unconverted" else flexsn.convert(m)).to(device)
    return m, lambda: functional.reset_net(m)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["norse", "spikingjelly", "flexsn", "spikingjelly-unconverted"])
def test_each_neuron_becomes_one_scan_with_eager_numbers(device, name):
    """(SpikingJelly's own LIFNode runs its operator each step; rolled, it
    is flexsn's LIF core, whose membrane rounds as flexsn.convert's does)"""
    model, reset = _model(name, torch.device(device))
    x = torch.rand(6, 3, 8, device=device) * 3
    want = _step(model, x, reset)
    final = [m.v.clone() for m in model.modules() if hasattr(m, "v_threshold")]
    rolled = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", flexsn.LoopWarning)
        got = _step(_compiled(model, rolled), x, reset)
    assert rolled == [2]  # both layers' chains
    for a, b in zip(got[0], want[0]):
        assert torch.equal(a, b)
    tight = name != "spikingjelly-unconverted"
    for a, b in zip(got[1], want[1]):
        assert (a is None) == (b is None)
        if a is not None:
            torch.testing.assert_close(a, b, rtol=1e-6 if tight else 1e-5,
                                       atol=1e-7 if tight else 1e-6)
    for a, m in zip(final, [m for m in model.modules() if hasattr(m, "v_threshold")]):
        torch.testing.assert_close(m.v, a, rtol=1e-6, atol=1e-6)  # where the loop left it


@pytest.mark.parametrize("device", DEVICES)
def test_norse_parameters_on_another_device_or_dtype_roll(device):
    """Norse keeps its parameters (and the initial states made from them)
    where they were made, f32 on the CPU: the loop still compiles whole and
    rolls when the input is elsewhere (f64 here; CUDA on a GPU), where each
    step converts them again (an integer threshold here)."""
    torch.manual_seed(0)
    model = _NorseLoop()
    model.cell1 = flexsn.from_norse(nt.LIFCell(nt.LIFParameters(v_th=torch.tensor(1))))
    model = model.to(device, torch.float64)
    assert model.cell1.module.p.tau_mem_inv.dtype == torch.float32
    x = torch.rand(6, 3, 8, device=device, dtype=torch.float64) * 3
    got, want, rolled = _rolled_and_eager(model, x, lambda: None)
    assert rolled == [2]
    for a, b in zip(got[0], want[0]):
        assert torch.equal(a, b)
    for a, b in zip(got[1], want[1]):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", ["norse", "spikingjelly", "flexsn"])
def test_inference_rolls_too(name):
    """(bit for bit, with the layers per step)"""
    model, reset = _model(name, torch.device("cpu"))
    x = torch.rand(5, 2, 8) * 3
    with torch.no_grad():
        reset()
        want = model(x)
        rolled = []
        compiled = _compiled(model, rolled)
        reset()
        got = compiled(x)
    assert rolled == [2]
    got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
    for a, b in zip(got, want):
        assert torch.equal(a, b)


def test_spikingjelly_states_end_where_the_loop_leaves_them():
    model, reset = _model("spikingjelly", torch.device("cpu"))
    x = torch.rand(4, 2, 8) * 3
    reset()
    model(x)
    want = [model.sn1.v.clone(), model.sn2.v.clone()]
    compiled = _compiled(model, [])
    reset()
    compiled(x)
    assert torch.equal(model.sn1.v, want[0]) and torch.equal(model.sn2.v, want[1])


def test_a_loop_that_reads_every_state_rolls_with_state_sequences():
    """A loop that keeps each step's state of layer 1: the rolled call is
    the binding that writes state sequences, each step's state its row."""
    torch.manual_seed(0)
    model = _NorseLoop(record_states=True)
    x = torch.rand(5, 2, 8) * 3
    want = model(x)
    rolled = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", flexsn.LoopWarning)
        got = _compiled(model, rolled)(x)
    assert rolled == [2]
    for a, b in zip(got, want):
        assert torch.equal(a, b)


class _Recurrent(nn.Module):
    """A step whose input reads the neuron's previous spikes."""

    def __init__(self):
        super().__init__()
        self.fc, self.cell = nn.Linear(8, 8), flexsn.from_norse(nt.LIFCell())

    def forward(self, x):
        s, z, outs = None, torch.zeros_like(x[0]), []
        for t in range(x.shape[0]):
            z, s = self.cell(self.fc(x[t]) + 0.5 * z, s)
            outs.append(z)
        return torch.stack(outs)


def test_a_recurrent_step_stays_per_step_and_says_why():
    torch.manual_seed(0)
    model = _Recurrent()
    x = torch.rand(5, 2, 8) * 3
    want = model(x)
    rolled = []
    with pytest.warns(flexsn.LoopWarning, match="depends on an earlier step"):
        got = _compiled(model, rolled)(x)
    assert rolled == [0]
    assert torch.equal(got, want)


class _Tutorial5(nn.Module):
    """snnTorch tutorial 5's network and loop, with from_snntorch neurons."""

    def __init__(self):
        super().__init__()
        snn = pytest.importorskip("snntorch")
        self.fc1 = nn.Linear(8, 16)
        self.lif1 = flexsn.from_snntorch(snn.Leaky(beta=0.9))
        self.fc2 = nn.Linear(16, 4)
        self.lif2 = flexsn.from_snntorch(snn.Leaky(beta=0.9))

    def forward(self, x):
        mem1, mem2 = self.lif1.init_leaky(), self.lif2.init_leaky()
        spk2_rec, mem2_rec = [], []
        for step in range(x.shape[0]):
            spk1, mem1 = self.lif1(self.fc1(x[step]), mem1)
            spk2, mem2 = self.lif2(self.fc2(spk1), mem2)
            spk2_rec.append(spk2)
            mem2_rec.append(mem2)
        return torch.stack(spk2_rec, dim=0), torch.stack(mem2_rec, dim=0)


@pytest.mark.parametrize("device", DEVICES)
def test_snntorch_tutorial_loop_compiles_whole_and_rolls(device):
    """snnTorch's forward breaks Dynamo's graph (and a break in a loop
    makes it skip the whole forward); from_snntorch's neurons run a step
    under torch.compile as their scan over one step, so the loop is one
    graph (fullgraph=True), which the backend rolls: the spikes are
    snnTorch's, membranes and gradients within its adapters' tolerance."""
    torch.manual_seed(0)
    model = _Tutorial5().to(device)
    x = torch.rand(6, 3, 8, device=device) * 2
    want = _step(model, x, lambda: None)
    rolled = []

    def then(gm, example_inputs):
        rolled.append(gm.meta["flexsn_rolled"])
        return gm.forward
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True,
                             backend=flexsn.Backend(then=then, batch_steps=False))
    got = _step(compiled, x, lambda: None)
    assert rolled == [2]
    assert torch.equal(got[0][0], want[0][0])
    torch.testing.assert_close(got[0][1], want[0][1], rtol=1e-5, atol=1e-6)
    for a, b in zip(got[1], want[1]):
        if a is not None:
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_snntorch_step_under_torch_compile_without_the_backend():
    """The one-step scan makes a from_snntorch loop compile (fullgraph)
    under any backend, with snnTorch's spikes and states."""
    torch.manual_seed(0)
    model = _Tutorial5()
    x = torch.rand(4, 2, 8) * 2
    want = model(x)
    torch._dynamo.reset()
    got = torch.compile(model, fullgraph=True, backend="aot_eager")(x)
    assert torch.equal(got[0], want[0])
    torch.testing.assert_close(got[1], want[1], rtol=1e-5, atol=1e-6)


def test_the_rest_goes_to_the_backend_named():
    model, reset = _model("norse", torch.device("cpu"))
    x = torch.rand(4, 2, 8) * 3
    want = model(x)
    torch._dynamo.reset()
    got = torch.compile(model, backend=flexsn.Backend(then="aot_eager"))(x)
    for a, b in zip(got, want):
        assert torch.equal(a, b)


def test_inductor_compiles_the_rest():
    """flexsn.backend as torch.compile takes it: Inductor compiles the
    layers around the rolled scans (its fused linear backward may round
    the weights' gradients differently in the last bits)."""
    model, reset = _model("norse", torch.device("cpu"))
    x = torch.rand(6, 3, 8) * 3
    want = _step(model, x, reset)
    torch._dynamo.reset()
    got = _step(torch.compile(model, backend=flexsn.backend), x, reset)
    for a, b in zip(got[0], want[0]):
        assert torch.equal(a, b)
    for a, b in zip(got[1], want[1]):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("device", DEVICES)
def test_torch_compile_modes_go_to_inductor(device):
    """mode and options configure Inductor as without the backend: on CUDA,
    "reduce-overhead" replays the rolled step from CUDA graphs, with the
    loop's numbers at every step."""
    model, reset = _model("norse", torch.device(device))
    x = torch.rand(6, 3, 8, device=device) * 3
    want = _step(model, x, reset)
    torch._dynamo.reset()
    mode = "reduce-overhead" if device == "cuda" else "max-autotune-no-cudagraphs"
    compiled = torch.compile(model, backend=flexsn.backend, mode=mode)
    for _ in range(3):  # recorded, then replayed
        torch.compiler.cudagraph_mark_step_begin()
        got = _step(compiled, x, reset)
        for a, b in zip(got[0], want[0]):
            assert torch.equal(a, b)
        for a, b in zip(got[1], want[1]):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)


def test_torch_compile_modes_need_inductor():
    model, reset = _model("norse", torch.device("cpu"))
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=flexsn.Backend(then="eager"), mode="reduce-overhead")
    with pytest.raises(Exception, match="mode and options configure Inductor"):
        compiled(torch.rand(6, 3, 8))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["norse", "spikingjelly", "flexsn"])
def test_layers_batched_over_the_steps(device, name):
    """With batch_steps (the default) the Linear layers that feed each
    neuron run once over all steps: the spikes are the loop's, states and
    gradients within a batched product's rounding."""
    model, reset = _model(name, torch.device(device))
    x = torch.rand(6, 3, 8, device=device) * 3
    want = _step(model, x, reset)
    rolled, layers = [], []

    def then(gm, example_inputs):
        rolled.append(gm.meta["flexsn_rolled"])
        layers.append(sum(1 for n in gm.graph.nodes if n.op == "call_function"
                          and n.target in (torch._C._nn.linear, torch.stack)))
        return gm.forward
    torch._dynamo.reset()
    got = _step(torch.compile(model, backend=flexsn.Backend(then=then)), x, reset)
    # both Linear layers inside the batched steps; the loop's stack of the
    # output spikes is the rolled output itself
    assert rolled == [2] and layers == [0]
    for a, b in zip(got[0], want[0]):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    for a, b in zip(got[1], want[1]):
        if a is not None:
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5 * max(1.0, b.abs().max().item()))


def test_each_distinct_T_compiles_once():
    """Dynamo unrolls the loop for each T it sees: a new T compiles once,
    a T seen before reuses its graph, and every T gives eager's numbers."""
    model, reset = _model("norse", torch.device("cpu"))
    calls = []

    def then(gm, example_inputs):
        calls.append(gm.meta["flexsn_rolled"])
        return gm.forward
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=flexsn.Backend(then=then, batch_steps=False))
    for T in (4, 6, 4, 6):
        x = torch.rand(T, 2, 8) * 3
        for a, b in zip(compiled(x), model(x)):
            assert torch.equal(a, b)
    assert calls == [2, 2]


class _Dropout(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.drop = nn.Linear(8, 16), nn.Dropout(0.5)
        self.cell = flexsn.from_norse(nt.LIFCell())

    def forward(self, x):
        s, outs = None, []
        for t in range(x.shape[0]):
            z, s = self.cell(self.drop(self.fc(x[t])), s)
            outs.append(z)
        return torch.stack(outs)


def test_dropout_between_layers():
    """A random op in the batched layers draws per step, as the loop's
    steps do (from torch.compile's random numbers, not eager's): the
    firing rate is the loop's; in eval mode every number is."""
    torch.manual_seed(0)
    model = _Dropout()
    x = torch.rand(5, 400, 8) * 3
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=flexsn.Backend(then="aot_eager"))
    got, want = compiled(x), model(x)
    assert abs(got.mean().item() - want.mean().item()) < 0.01
    model.eval()
    assert torch.equal(compiled(x), model(x))


class _FirstStepConstant(nn.Module):
    """A flexsn neuron with a learned decay: step 0 feeds it a constant (no
    gradient), the later steps a layer's output. The first step's binding
    does not differentiate its input, so it cannot run the others."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.decay = nn.Parameter(torch.tensor(0.5))
        decay = self.decay

        def lif(x, v):
            h = decay * v + x
            s = flexsn.surrogate.Sigmoid()(h - 1.0)
            return s, h * (1.0 - s)
        self.sn = flexsn.FlexSN(lif, 1, 1, 1, step_mode="s")

    def forward(self, x):
        outs = []
        for t in range(x.shape[0]):
            outs.append(self.sn(torch.ones_like(x[0]) if t == 0 else self.fc(x[t])))
        return torch.stack(outs)


def test_steps_that_differentiate_more_than_the_first_stay_per_step():
    torch.manual_seed(0)
    model = _FirstStepConstant()
    x = torch.rand(4, 2, 8) * 3
    want = _step(model, x, model.sn.reset)
    rolled = []
    with pytest.warns(flexsn.LoopWarning, match="a later step differentiates"):
        got = _step(_compiled(model, rolled), x, model.sn.reset)
    assert rolled == [0]
    for a, b in zip(got[0] + list(got[1]), want[0] + list(want[1])):
        if a is not None:
            assert torch.equal(a, b)


@pytest.mark.parametrize("mutate", [False, True])
def test_per_step_conversions_of_one_value_are_one_parameter_unless_changed_in_place(mutate):
    """Each step's ``p.to(...)`` of one graph value is the same parameter,
    but not once an op of the graph changes p in place."""
    from flexsn import _backend

    def f(p):
        a = p.to(torch.float64)
        if mutate:
            p.add_(1)
        return a, p.to(torch.float64), p.to(torch.float32)

    gm = torch.fx.symbolic_trace(f)
    a, b, c = [n for n in gm.graph.nodes if n.op == "call_method" and n.target == "to"]
    mutated = _backend._mutated(gm)
    assert _backend._same_value(a, b, mutated) is not mutate
    assert not _backend._same_value(a, c, mutated)


# -- neurons written inline in the loop -----------------------------------------

def _spike_fn(name):
    if name == "flexsn":
        return flexsn.surrogate.Sigmoid(alpha=4.0)
    if name == "heaviside":
        return lambda v: (v > 0).float()
    if name == "spikingjelly":
        from spikingjelly.activation_based import surrogate
        return surrogate.Sigmoid(alpha=4.0)
    snn_surrogate = pytest.importorskip("snntorch.surrogate")
    return {"atan": snn_surrogate.atan(alpha=2.0),
            "fast_sigmoid": snn_surrogate.fast_sigmoid(slope=25)}[name]


class _InlineLoop(nn.Module):
    """Two LIF layers written in the loop body, as snnTorch's tutorials
    write them by hand: a learned decay, reset by subtraction in the first,
    to zero in the second, whose membrane the loop records."""

    def __init__(self, spike):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 16), nn.Linear(16, 4)
        self.beta = nn.Parameter(torch.tensor(0.8))
        self.spike = spike

    def forward(self, x):
        mem1 = torch.zeros(x.shape[1], 16, device=x.device)
        mem2 = torch.zeros(x.shape[1], 4, device=x.device)
        spikes, mems = [], []
        for t in range(x.shape[0]):
            mem1 = self.beta * mem1 + self.fc1(x[t])
            spk1 = self.spike(mem1 - 1.0)
            mem1 = mem1 - spk1
            mem2 = 0.9 * mem2 + self.fc2(spk1)
            spk2 = self.spike(mem2 - 1.0)
            mem2 = mem2 * (1.0 - spk2)
            spikes.append(spk2)
            mems.append(mem2)
        return torch.stack(spikes), torch.stack(mems), mem1


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("spike", ["atan", "fast_sigmoid", "spikingjelly", "flexsn", "heaviside"])
def test_inline_neurons_roll_with_eager_numbers(device, spike):
    torch.manual_seed(0)
    model = _InlineLoop(_spike_fn(spike)).to(device)
    x = torch.rand(7, 3, 8, device=device) * 3
    got, want, rolled = _rolled_and_eager(model, x, lambda: None, batch_steps=True)
    assert rolled == [2]
    assert torch.equal(got[0][0], want[0][0])  # the spikes
    assert got[0][0].sum() > 0
    for a, b in zip(got[0][1:], want[0][1:]):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    for a, b in zip(got[1], want[1]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_inline_neurons_roll_in_inference():
    torch.manual_seed(0)
    model = _InlineLoop(_spike_fn("flexsn"))
    x = torch.rand(5, 2, 8) * 3
    with torch.no_grad():
        want = model(x)
        rolled = []
        got = _compiled(model, rolled)(x)
    assert rolled == [2]
    assert torch.equal(got[0], want[0])
    torch.testing.assert_close(got[1], want[1], rtol=1e-5, atol=1e-6)


class _Unlinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, v):
        ctx.save_for_backward(v)
        return (v > 0).float()

    @staticmethod
    def backward(ctx, grad):
        (v,) = ctx.saved_tensors
        return grad * torch.sigmoid(v) + 0.1  # not grad times a factor


def test_a_half_precision_inline_neuron_stays_as_traced():
    """The loop rounds every op to bf16; a fused kernel would not."""
    torch.manual_seed(0)
    model = _InlineSynaptic().to(torch.bfloat16)
    x = (torch.rand(5, 4, 8) * 2).to(torch.bfloat16)
    want = _step(model, x, lambda: None)
    rolled = []
    with pytest.warns(flexsn.LoopWarning, match="torch.bfloat16: the loop rounds every op"):
        got = _step(_compiled(model, rolled), x, lambda: None)
    assert rolled == [0]
    assert torch.equal(got[0][0], want[0][0])


@pytest.mark.parametrize("case, reason", [
    ("mean", "passes mean, which is not an elementwise op"),
    ("backward", "backward is not the incoming gradient times"),
    ("first", "not the same computation each"),
    ("in place", "changes it in place"),
])
def test_inline_neurons_it_cannot_compile_stay_and_say_why(case, reason):
    class Loop(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)

        def forward(self, x):
            mem, outs = (None if case == "first" else torch.zeros(x.shape[1], 8)), []
            drift = torch.zeros(8)
            for t in range(x.shape[0]):
                cur = self.fc(x[t])
                mem = cur if mem is None else 0.9 * mem + cur + drift
                if case == "in place":
                    drift.add_(0.01)  # a value that changes from step to step
                if case == "mean":
                    mem = mem - mem.mean()
                spk = _Unlinear.apply(mem - 1.0) if case == "backward" else \
                    flexsn.surrogate.ATan()(mem - 1.0)
                mem = mem - spk
                outs.append(spk)
            return torch.stack(outs)
    torch.manual_seed(0)
    model = Loop()
    x = torch.rand(5, 2, 8) * 3
    want = _step(model, x, lambda: None)
    rolled = []
    with pytest.warns(flexsn.LoopWarning, match=reason):
        got = _step(_compiled(model, rolled), x, lambda: None)
    assert rolled == [0]
    for a, b in zip(list(got[0]) + list(got[1]), list(want[0]) + list(want[1])):
        torch.testing.assert_close(a, b)


def test_an_inline_neuron_fed_by_another_directly_rolls():
    """The second neuron's input is the first one's spike itself (no layer
    between): the two are one core, with both membranes as its states."""
    class Chain(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)

        def forward(self, x):
            m1, m2 = torch.zeros(x.shape[1], 8), torch.zeros(x.shape[1], 8)
            outs = []
            for t in range(x.shape[0]):
                m1 = 0.9 * m1 + self.fc(x[t])
                s1 = flexsn.surrogate.ATan()(m1 - 1.0)
                m1 = m1 - s1
                m2 = 0.8 * m2 + s1
                s2 = flexsn.surrogate.ATan()(m2 - 0.5)
                m2 = m2 - s2
                outs.append(s2)
            return torch.stack(outs)
    torch.manual_seed(0)
    model = Chain()
    x = torch.rand(7, 3, 8) * 3
    got, want, rolled = _rolled_and_eager(model, x, lambda: None)
    assert rolled == [1]
    assert torch.equal(got[0][0], want[0][0]) and got[0][0].sum() > 0
    for a, b in zip(got[1], want[1]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


class _InlineSynaptic(nn.Module):
    """A two-state neuron written inline (a synaptic current and a
    membrane, snnTorch's Synaptic by hand) with a learned decay per neuron."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 16)
        self.alpha = nn.Parameter(torch.linspace(0.5, 0.9, 16))

    def forward(self, x):
        syn = torch.zeros(x.shape[1], 16, dtype=x.dtype)
        mem = torch.zeros(x.shape[1], 16, dtype=x.dtype)
        outs = []
        for t in range(x.shape[0]):
            syn = self.alpha * syn + self.fc(x[t])
            mem = 0.9 * mem + syn
            spk = flexsn.surrogate.Sigmoid()(mem - 1.0)
            mem = mem * (1.0 - spk)
            outs.append(spk)
        return torch.stack(outs), syn


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_an_inline_neuron_with_two_states_and_a_decay_per_neuron_rolls(dtype):
    torch.manual_seed(0)
    model = _InlineSynaptic().to(dtype)
    x = torch.rand(6, 3, 8, dtype=dtype) * 2
    got, want, rolled = _rolled_and_eager(model, x, lambda: None)
    assert rolled == [1]  # the current and the membrane it feeds: one core
    assert torch.equal(got[0][0], want[0][0]) and got[0][0].sum() > 0
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(got[0][1], want[0][1], **tol)
    for a, b in zip(got[1], want[1]):  # x, fc's weight and bias, alpha
        torch.testing.assert_close(a, b, **tol)


def test_an_inline_loop_compiles_once_per_T():
    torch.manual_seed(0)
    model = _InlineLoop(_spike_fn("flexsn"))
    rolled = []
    compiled = _compiled(model, rolled)
    for T in (4, 6, 4, 6):
        x = torch.rand(T, 2, 8) * 3
        with torch.no_grad():
            got, want = compiled(x), model(x)
        assert torch.equal(got[0], want[0])
    assert rolled == [2, 2]


@pytest.mark.parametrize("name", ["inline", "spikingjelly-unconverted", "norse", "flexsn"])
def test_a_new_batch_size_rolls_too(name):
    """Dynamo makes the batch size symbolic on the second size: the rolled
    calls take any batch size (states and parameters broadcast to a step's
    value, not to numbers)."""
    if name == "inline":
        torch.manual_seed(0)
        model, reset = _InlineLoop(_spike_fn("flexsn")), (lambda: None)
    else:
        model, reset = _model(name, torch.device("cpu"))
    rolled = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", flexsn.LoopWarning)
        compiled = _compiled(model, rolled)
        for B in (2, 3, 5):
            x = torch.rand(5, B, 8) * 3
            want = _step(model, x, reset)
            got = _step(compiled, x, reset)
            for a, b in zip(got[0], want[0]):
                if a.dtype == torch.float32 and name == "inline":
                    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
            assert torch.equal(got[0][0], want[0][0])
            for a, b in zip(got[1], want[1]):
                if a is not None:
                    torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    assert rolled == [2, 2]  # the first size, then any


def _random_program(rng, num_states):
    """A random step: ops over [x_t, states..., a learned parameter], each
    appending a value; then each new state (bounded) and two outputs, as
    indices into the values."""
    # each state first leaks and takes the input (or the state before it)
    ops = [("decay", 1 + s, 0 if s == 0 else 1 + num_states + s, 0, 0.0)
           for s in range(num_states)]
    n = 2 + 2 * num_states
    for _ in range(int(rng.integers(3, 9))):
        kind = str(rng.choice(["add", "sub", "mul", "scale", "tanh", "sigmoid", "where",
                               "spike", "detach", "decay"]))
        ops.append((kind, *(int(i) for i in rng.integers(0, n, 3)), float(rng.uniform(-1.5, 1.5))))
        n += 1
    states = [int(i) for i in rng.integers(2 + num_states, n, num_states)]
    outputs = [int(i) for i in rng.integers(1, n, 2)]
    return ops, states, outputs


class _RandomInline(nn.Module):
    def __init__(self, program, num_states):
        super().__init__()
        self.program, self.num_states = program, num_states
        self.p = nn.Parameter(torch.linspace(-0.5, 0.8, 4, dtype=torch.float64))

    def forward(self, x):
        ops, new_states, outputs = self.program
        states = [torch.zeros(x.shape[1], 4, dtype=x.dtype) for _ in range(self.num_states)]
        out = []
        for t in range(x.shape[0]):
            v = [x[t], *states, self.p]
            for kind, i, j, k, c in ops:
                a, b, d = v[i], v[j], v[k]
                v.append({"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
                          "scale": lambda: a * c, "tanh": lambda: torch.tanh(a),
                          "sigmoid": lambda: torch.sigmoid(a),
                          "where": lambda: torch.where(a > 0, b, d),
                          "spike": lambda: flexsn.surrogate.ATan()(a - c),
                          "detach": lambda: a.detach(),
                          "decay": lambda: 0.9 * a + b}[kind]())
            states = [2 * torch.tanh(v[s]) for s in new_states]
            out.append(v[outputs[0]] + v[outputs[1]] + 0.0 * x[t])  # x's gradient always
        return torch.stack(out), *states


def test_random_inline_neurons_give_eager_numbers():
    """Random elementwise steps with one or two states, in f64 (where a
    fused kernel's rounding cannot move a spike): under flexsn.backend,
    eager's outputs, final states and gradients, rolled or left as traced."""
    import numpy as np
    rng = np.random.default_rng(7)
    rolled_any = 0
    for case in range(24):
        num_states = 1 + case % 2
        model = _RandomInline(_random_program(rng, num_states), num_states)
        torch.manual_seed(case)
        x = torch.randn(5, 3, 4, dtype=torch.float64) * 2
        want = _step(model, x, lambda: None)
        rolled = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", flexsn.LoopWarning)  # a product of states, say
            got = _step(_compiled(model, rolled), x, lambda: None)
        rolled_any += bool(rolled and rolled[0])
        for a, b in zip(list(got[0]) + list(got[1]), list(want[0]) + list(want[1])):
            assert (a is None) == (b is None), (case, model.program)
            if a is not None:
                torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-10,
                                           msg=lambda m: f"case {case} {model.program}: {m}")
    assert rolled_any >= 8  # the test exercises the rolled path


def test_an_inline_neuron_from_a_learned_initial_state_rolls():
    class Loop(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)
            self.mem0 = nn.Parameter(torch.linspace(-0.5, 0.5, 8))

        def forward(self, x):
            mem, outs = self.mem0.expand(x.shape[1], 8), []
            for t in range(x.shape[0]):
                mem = 0.9 * mem + self.fc(x[t])
                spk = flexsn.surrogate.Sigmoid()(mem - 1.0)
                mem = mem - spk
                outs.append(spk)
            return torch.stack(outs), mem
    torch.manual_seed(0)
    model = Loop()
    got, want, rolled = _rolled_and_eager(model, torch.rand(6, 3, 8) * 2)
    assert rolled == [1]
    assert torch.equal(got[0][0], want[0][0])
    for a, b in zip(got[1], want[1]):  # x, fc's weight and bias, mem0
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
