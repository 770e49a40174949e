"""flexsn.backend with snnTorch's and Norse's own neurons, unconverted.
Their forwards break Dynamo's graph, so while the backend traces they run
as flexsn.snntorch and flexsn.norse capture them (the library's arithmetic
and its own spike functions); the loop then reaches the backend whole and
each neuron rolls as an inline neuron, with eager's outputs, final states
and gradients. Any other backend still sees the library's forward."""

import warnings

import pytest
import torch
from torch import nn

import flexsn
from conftest import DEVICES
from test_backend import _compiled, _step

snn = pytest.importorskip("snntorch")
snn_utils = pytest.importorskip("snntorch.utils")
nt = pytest.importorskip("norse.torch")

SNNTORCH = {
    "leaky": lambda n: snn.Leaky(beta=0.9),
    "leaky-zero-learned": lambda n: snn.Leaky(
        beta=torch.linspace(0.5, 0.95, n), learn_beta=True, learn_threshold=True,
        reset_mechanism="zero", spike_grad=snn.surrogate.fast_sigmoid()),
    "leaky-no-delay": lambda n: snn.Leaky(beta=0.8, reset_delay=False,
                                          spike_grad=snn.surrogate.sigmoid()),
    "leaky-no-surrogate": lambda n: snn.Leaky(beta=0.9, surrogate_disable=True),
    "synaptic": lambda n: snn.Synaptic(alpha=0.8, beta=0.9),
    "alpha": lambda n: snn.Alpha(alpha=0.9, beta=0.8),
    "lapicque": lambda n: snn.Lapicque(beta=0.9),
    "rleaky": lambda n: snn.RLeaky(beta=0.9, V=0.5, all_to_all=False),
    "rsynaptic": lambda n: snn.RSynaptic(alpha=0.8, beta=0.9, V=0.5, all_to_all=False),
}


class _SnnTorchLoop(nn.Module):
    """snnTorch tutorial 5's loop: states from reset_mem() (empty until the
    first step makes them), ``spk, mem = lif(cur, mem)`` per step."""

    def __init__(self, make):
        super().__init__()
        self.fc1, self.lif1 = nn.Linear(8, 16), make(16)
        self.fc2, self.lif2 = nn.Linear(16, 4), make(4)
        self.recurrent = isinstance(self.lif1, (snn.RLeaky, snn.RSynaptic))

    def _states(self, out):
        return out if self.recurrent else out[1:]  # RLeaky takes its spikes back

    def forward(self, x):
        s1, s2 = self.lif1.reset_mem(), self.lif2.reset_mem()
        s1, s2 = (s if isinstance(s, tuple) else (s,) for s in (s1, s2))
        spikes, mems = [], []
        for t in range(x.shape[0]):
            o1 = self.lif1(self.fc1(x[t]), *s1)
            o2 = self.lif2(self.fc2(o1[0]), *s2)
            s1, s2 = self._states(o1), self._states(o2)
            spikes.append(o2[0])
            mems.append(o2[-1])
        return torch.stack(spikes), torch.stack(mems)


class _SnnTorchHidden(nn.Module):
    """init_hidden=True: the neurons keep their states, return spikes."""

    def __init__(self):
        super().__init__()
        self.fc1, self.lif1 = nn.Linear(8, 16), snn.Leaky(beta=0.9, init_hidden=True)
        self.fc2, self.lif2 = nn.Linear(16, 4), snn.Leaky(beta=0.9, init_hidden=True)

    def forward(self, x):
        return torch.stack([self.lif2(self.fc2(self.lif1(self.fc1(x[t]))))
                            for t in range(x.shape[0])])


def _izhikevich():
    return nt.IzhikevichCell(nt.tonic_spiking)


NORSE = {
    "lif": lambda: nt.LIFCell(),
    "lif-tanh": lambda: nt.LIFCell(nt.LIFParameters(v_th=torch.tensor(0.3),
                                                    alpha=torch.tensor(50.0), method="tanh")),
    "lif-box": lambda: nt.LIFBoxCell(),
    "li": lambda: nt.LICell(),
    "iaf": lambda: nt.IAFCell(),
    "lif-adex": lambda: nt.LIFAdExCell(),
    "izhikevich": _izhikevich,
}


class _NorseOwnLoop(nn.Module):
    """Norse users' loop with Norse's own cells: ``z, s = cell(x[t], s)``,
    the first call without a state."""

    def __init__(self, make):
        super().__init__()
        self.fc1, self.cell1 = nn.Linear(8, 16), make()
        self.fc2, self.cell2 = nn.Linear(16, 4), nt.LICell()

    def forward(self, x):
        s1 = s2 = None
        outs = []
        for t in range(x.shape[0]):
            z, s1 = self.cell1(self.fc1(x[t]) * 40, s1)
            v, s2 = self.cell2(self.fc2(z), s2)
            outs.append(v)
        return torch.stack(outs), s1.v


def _rolls_like_eager(model, x, reset=lambda: None):
    want = _step(model, x, reset)
    rolled = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", flexsn.LoopWarning)
        got = _step(_compiled(model, rolled), x, reset)
    assert rolled and rolled[0] >= 2  # every neuron (a state may be a core of its own)
    for a, b in zip(got[0], want[0]):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
    for a, b in zip(got[1], want[1]):
        assert (a is None) == (b is None)
        if a is not None:
            # equal_nan: snnTorch's sigmoid surrogate overflows to NaN far below
            # the threshold, in eager as in the rolled loop
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5, equal_nan=True)
    return got, want


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(SNNTORCH))
def test_snntorch_own_neurons_roll_with_eager_numbers(device, name):
    torch.manual_seed(0)
    model = _SnnTorchLoop(SNNTORCH[name]).to(device)
    x = torch.rand(6, 3, 8, device=device) * 3
    got, want = _rolls_like_eager(model, x)
    assert torch.equal(got[0][0], want[0][0])  # the spikes


@pytest.mark.parametrize("device", DEVICES)
def test_snntorch_neurons_that_keep_their_states_roll_and_store_the_last(device):
    torch.manual_seed(0)
    model = _SnnTorchHidden().to(device)
    x = torch.rand(6, 3, 8, device=device) * 3

    def reset():
        snn_utils.reset(model)
    _step(model, x, reset)
    want_mem = model.lif2.mem.detach().clone()
    _rolls_like_eager(model, x, reset)
    torch.testing.assert_close(model.lif2.mem.detach(), want_mem, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(NORSE))
def test_norse_own_cells_roll_with_eager_numbers(device, name):
    """(Norse keeps its parameters on the CPU: on CUDA the cores read them
    as the loop does, as numbers)"""
    torch.manual_seed(0)
    model = _NorseOwnLoop(NORSE[name]).to(device)
    _rolls_like_eager(model, torch.rand(6, 3, 8, device=device))


def test_other_backends_still_see_the_library_forward():
    """Only flexsn.backend's traces capture: Dynamo's own explain (another
    backend) still breaks at snnTorch's ``mem == None``."""
    flexsn.Backend()  # installs the captured forwards
    lif, fc = snn.Leaky(beta=0.9), nn.Linear(8, 16)

    def loop(x):
        mem, outs = lif.reset_mem(), []
        for t in range(x.shape[0]):
            spk, mem = lif(fc(x[t]), mem)
            outs.append(spk)
        return torch.stack(outs)
    torch._dynamo.reset()
    assert torch._dynamo.explain(loop)(torch.rand(4, 2, 8)).graph_break_count > 0


class _OwnInitial(nt.LIFCell):
    def initial_state(self, input_tensor):
        return super().initial_state(input_tensor)


@pytest.mark.parametrize("library", ["snntorch", "norse"])
def test_library_neurons_it_does_not_capture_run_as_eager_and_say_so(library):
    """Options the captured forwards leave to the library (snnTorch's
    inhibition, a Norse cell with an initial_state of its own) break
    Dynamo's graph as before: the loop runs step by step with eager's
    numbers and one warning that says why."""
    from flexsn import _backend
    torch.manual_seed(0)
    if library == "snntorch":
        neuron, why = snn.Leaky(beta=0.9, inhibition=True), "inhibition"
    else:
        neuron, why = _OwnInitial(), "initial_state"
    fc = nn.Linear(8, 16)

    def loop(x):
        outs, state = [], None
        for t in range(x.shape[0]):
            if library == "snntorch":
                spk, state = neuron(fc(x[t]), state if state is not None else neuron.reset_mem())
            else:
                spk, state = neuron(fc(x[t]) * 40, state)
            outs.append(spk)
        return torch.stack(outs)
    x = torch.rand(5, 2, 8) * 3
    want = loop(x)
    _backend._warned.clear()
    torch._dynamo.reset()
    with pytest.warns(flexsn.LoopWarning, match=why):
        got = torch.compile(loop, backend=flexsn.Backend(then="eager"))(x)
    assert torch.equal(got, want)


def test_libraries_imported_after_the_backend_are_captured_too():
    """A library imported after flexsn.backend was first used is captured
    when its import completes (a fresh process: this one imported both)."""
    code = "\n".join([
        "import warnings, torch, flexsn",
        "backend = flexsn.Backend(then='eager')",
        "import snntorch, norse.torch as nt",
        "lif, cell = snntorch.Leaky(beta=0.9), nt.LIFCell()",
        "def loop(x):",
        "    mem, s, outs = lif.reset_mem(), None, []",
        "    for t in range(x.shape[0]):",
        "        spk, mem = lif(x[t], mem)",
        "        z, s = cell(spk * 40, s)",
        "        outs.append(z)",
        "    return torch.stack(outs)",
        "x = torch.rand(5, 2, 3) * 3",
        "want = loop(x)",
        "with warnings.catch_warnings():",
        "    warnings.simplefilter('error', flexsn.LoopWarning)",
        "    got = torch.compile(loop, backend=backend)(x)",
        "assert torch.equal(got, want)",
        "print('captured', snntorch.Leaky.forward.__wrapped__ is not None)",
    ])
    assert "captured True" in _in_a_fresh_process(code)


def test_using_the_kernels_alone_leaves_the_libraries_as_they_are():
    """flexsn's kernels alone (flexsn.neuron, from_snntorch) wrap no class
    of snnTorch's; flexsn.backend does (a fresh process)."""
    code = "\n".join([
        "import torch, snntorch, flexsn, flexsn.neuron",
        "flexsn.from_snntorch(snntorch.Leaky(beta=0.9))(torch.rand(2, 3))",
        "assert not hasattr(snntorch.Leaky.forward, '__wrapped__')",
        "flexsn.backend",
        "assert snntorch.Leaky.forward.__wrapped__ is not None",
        "print('ok')",
    ])
    assert "ok" in _in_a_fresh_process(code)


def _in_a_fresh_process(code: str) -> str:
    """`code` run by a child Python that imports this flexsn: its stdout
    (the test fails with its stderr where it fails)."""
    import subprocess
    from conftest import child_python
    argv, env = child_python()
    done = subprocess.run(argv + ["-c", code], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout
