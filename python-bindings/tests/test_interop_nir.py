"""flexsn.nir: graphs exported by snnTorch and Norse load and run as those
libraries' own importers run them; our export loads back identically and
into snnTorch's importer; malformed graphs are named errors."""

import warnings

import numpy as np
import pytest
import torch

import flexsn
import flexsn.nir as fnir
import nir
import norse.torch as nt
import snntorch as snn
from norse.torch.utils.export_nir import to_nir as norse_to_nir
from norse.torch.utils.import_nir import from_nir as norse_from_nir
from snntorch.export_nir import export_to_nir
from snntorch.import_nir import import_from_nir


def _step_graph_module(module, x):
    outs, state = [], None
    for t in range(x.shape[0]):
        r = module(x[t]) if state is None else module(x[t], state)
        o, state = r if isinstance(r, tuple) else (r, None)
        outs.append(o)
    return torch.stack(outs)


def _snntorch_net():
    return torch.nn.Sequential(
        torch.nn.Linear(4, 5),
        snn.Leaky(torch.linspace(0.8, 0.95, 5), threshold=torch.ones(5), init_hidden=True),
        torch.nn.Linear(5, 3),
        snn.Synaptic(torch.full((3,), 0.7), torch.full((3,), 0.8), threshold=torch.ones(3),
                     init_hidden=True))


def test_snntorch_export_loads_as_snntorch_imports(device):
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = export_to_nir(_snntorch_net(), torch.randn(4))
        ref = import_from_nir(graph)
    x = torch.randn(30, 6, 4) * 2
    want = _step_graph_module(ref, x)
    ours = fnir.load(graph, dt=1e-4).to(device)
    got = ours(x.to(device)).cpu()
    assert want.sum() > 0
    torch.testing.assert_close(got, want)


def test_conv_model_round_trip(tmp_path, device):
    torch.manual_seed(1)
    leaky = lambda n, b: flexsn.from_snntorch(snn.Leaky(  # noqa: E731
        torch.full((n,), b), threshold=torch.ones(n), reset_mechanism="zero",
        reset_delay=False))
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 2, 3, padding=1), torch.nn.AvgPool2d(2), torch.nn.Flatten(),
        leaky(18, 0.9), torch.nn.Linear(18, 3), leaky(3, 0.8)).to(device)
    with pytest.raises(ValueError, match="input_shape"):
        fnir.save(model, tmp_path / "conv.nir", dt=1e-4)
    fnir.save(model, tmp_path / "conv.nir", dt=1e-4, input_shape=(1, 6, 6))
    loaded = fnir.load(tmp_path / "conv.nir", dt=1e-4).to(device)
    x = torch.rand(12, 4, 1, 6, 6, device=device) * 3
    T, B = x.shape[:2]
    h = model[2](model[1](model[0](x.flatten(0, 1)))).unflatten(0, (T, B))
    s1 = model[3].forward_sequence(h)[0]
    want = model[5].forward_sequence(model[4](s1))[0]
    assert want.sum() > 0
    torch.testing.assert_close(loaded(x), want)


def test_norse_export_loads_as_norse_imports(device):
    torch.manual_seed(0)
    dt = 1e-3
    net = nt.SequentialState(
        torch.nn.Linear(4, 5),
        nt.LIFBoxCell(nt.LIFBoxParameters(tau_mem_inv=torch.full((5,), 0.5),
                                          v_th=torch.full((5,), 0.3), v_leak=torch.zeros(5))),
        torch.nn.Linear(5, 3),
        nt.LIFCell(nt.LIFParameters(tau_mem_inv=torch.full((3,), 0.5),
                                    tau_syn_inv=torch.full((3,), 0.25),
                                    v_th=torch.full((3,), 0.2), v_leak=torch.zeros(3),
                                    v_reset=torch.zeros(3))))
    graph = norse_to_nir(net, torch.randn(1, 4), dt=dt)
    ref = norse_from_nir(graph, dt=dt)
    x = torch.randn(30, 6, 4) * 20 + 10
    want = _step_graph_module(ref, x)
    got = fnir.load(graph, dt=dt).to(device)(x.to(device)).cpu()
    assert want.sum() > 0
    torch.testing.assert_close(got, want)


def test_norse_conv_export_loads_as_norse_imports(device):
    torch.manual_seed(0)
    dt = 1e-3

    def lif_box(shape, v_th):
        return nt.LIFBoxCell(nt.LIFBoxParameters(
            tau_mem_inv=torch.full(shape, 0.5), v_th=torch.full(shape, v_th),
            v_leak=torch.zeros(shape)))
    net = nt.SequentialState(torch.nn.Conv2d(1, 2, 3, padding=1), lif_box((2, 6, 6), 0.3),
                             torch.nn.Conv2d(2, 1, 3, padding=1), lif_box((1, 6, 6), 0.2))
    graph = norse_to_nir(net, torch.randn(1, 1, 6, 6), dt=dt)
    ref = norse_from_nir(graph, dt=dt)
    x = torch.randn(20, 3, 1, 6, 6) * 20 + 10
    want = _step_graph_module(ref, x)
    got = fnir.load(graph, dt=dt).to(device)(x.to(device)).cpu()
    assert want.sum() > 0
    torch.testing.assert_close(got, want)


def test_our_export_round_trip(tmp_path, device):
    torch.manual_seed(3)
    dt = 1e-4
    model = torch.nn.Sequential(
        torch.nn.Linear(4, 5),
        flexsn.from_snntorch(snn.Leaky(torch.full((5,), 0.9), threshold=torch.ones(5),
                                       reset_mechanism="zero", reset_delay=False)),
        torch.nn.Linear(5, 3),
        flexsn.from_snntorch(snn.Synaptic(torch.full((3,), 0.7), torch.full((3,), 0.8),
                                          threshold=torch.ones(3), reset_mechanism="zero",
                                          reset_delay=False)))
    path = tmp_path / "model.nir"
    fnir.save(model, path, dt=dt)
    loaded = fnir.load(path, dt=dt).to(device)
    x = torch.randn(20, 6, 4, device=device) * 2
    y = loaded(x)
    # the exported model itself, run directly
    model = model.to(device)
    s1 = model[1].forward_sequence(model[0](x))[0]
    direct = model[3].forward_sequence(model[2](s1))[0]
    torch.testing.assert_close(y, direct)
    # saved again from the loaded module: identical
    fnir.save(loaded, tmp_path / "again.nir", dt=dt)
    torch.testing.assert_close(fnir.load(tmp_path / "again.nir", dt=dt).to(device)(x), y)
    # snnTorch's importer reads our file with the same semantics
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = import_from_nir(nir.read(path))
    torch.testing.assert_close(_step_graph_module(ref, x.cpu()), y.cpu())


def test_norse_neurons_export(tmp_path):
    dt = 1e-3
    lif = flexsn.from_norse(nt.LIFCell(nt.LIFParameters(
        tau_mem_inv=torch.full((3,), 100.), tau_syn_inv=torch.full((3,), 200.),
        v_th=torch.full((3,), 0.3), v_leak=torch.zeros(3), v_reset=torch.zeros(3))))
    model = torch.nn.Sequential(torch.nn.Linear(2, 3), lif)
    fnir.save(model, tmp_path / "n.nir", dt=dt)
    loaded = fnir.load(tmp_path / "n.nir", dt=dt)
    x = torch.randn(25, 4, 2) * 20 + 10
    want = lif.forward_sequence(model[0](x))[0]
    torch.testing.assert_close(loaded(x), want)


def test_every_neuron_node_and_layers(device):
    """LIF, CubaLIF, IF, LI, CubaLI, I and Threshold against the documented
    Euler steps in plain PyTorch, with Scale, Delay and SumPool2d."""
    n, dt = 4, 0.1
    tau, r, vl, th = np.full(n, 0.5), np.full(n, 2.0), np.full(n, 0.1), np.full(n, 1.0)
    nodes = {
        "lif": nir.LIF(tau=tau, r=r, v_leak=vl, v_threshold=th, v_reset=np.zeros(n)),
        "cuba": nir.CubaLIF(tau_syn=tau, tau_mem=tau * 2, r=r, v_leak=vl, v_threshold=th,
                            v_reset=np.zeros(n), w_in=np.full(n, 1.5)),
        "if_": nir.IF(r=r, v_threshold=th, v_reset=np.zeros(n)),
        "li": nir.LI(tau=tau, r=r, v_leak=vl),
        "culi": nir.CubaLI(tau_syn=tau, tau_mem=tau * 2, r=r, v_leak=vl, w_in=np.ones(n)),
        "i": nir.I(r=r), "thr": nir.Threshold(threshold=np.full(n, 0.5)),
    }
    x = torch.rand(15, 3, n, device=device) * 3
    for name, node in nodes.items():
        graph = nir.NIRGraph(nodes={"input": nir.Input(np.array([n])), name: node,
                                    "output": nir.Output(np.array([n]))},
                             edges=[("input", name), (name, "output")], type_check=False)
        got = fnir.load(graph, dt=dt).to(device)(x)
        want = _reference(node, x, dt)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, msg=name)
    # a changed buffer is read (the coefficients are kept per buffer version)
    m = fnir.load(nir.NIRGraph(nodes={"input": nir.Input(np.array([n])), "lif": nodes["lif"],
                                      "output": nir.Output(np.array([n]))},
                               edges=[("input", "lif"), ("lif", "output")], type_check=False),
                  dt=dt).to(device)
    before = m(x)
    m.layer("lif").v_threshold.fill_(2.0)
    after = m(x)
    node = nir.LIF(tau=tau, r=r, v_leak=vl, v_threshold=np.full(n, 2.0), v_reset=np.zeros(n))
    torch.testing.assert_close(after, _reference(node, x, dt), rtol=1e-5, atol=1e-5)
    assert not torch.equal(before, after)
    scale = nir.NIRGraph(nodes={"input": nir.Input(np.array([n])),
                                "s": nir.Scale(np.arange(n, dtype=np.float32)),
                                "d": nir.Delay(np.array([2 * dt] * n)),
                                "output": nir.Output(np.array([n]))},
                         edges=[("input", "s"), ("s", "d"), ("d", "output")], type_check=False)
    y = fnir.load(scale, dt=dt).to(device)(x)
    torch.testing.assert_close(y[2:], x[:-2] * torch.arange(n, device=device))
    assert not y[:2].any()


def _reference(node, x, dt):
    v = torch.zeros_like(x[0])
    i = torch.zeros_like(x[0])
    f = lambda a: torch.as_tensor(np.asarray(a), dtype=x.dtype, device=x.device)  # noqa
    out = []
    for t in range(x.shape[0]):
        if isinstance(node, nir.Threshold):
            out.append((x[t] > f(node.threshold)).to(x.dtype))
            continue
        if t == 0 and hasattr(node, "v_leak"):
            v = v + f(node.v_leak)
        if isinstance(node, (nir.LIF, nir.LI)):
            v = v + dt / f(node.tau) * (f(node.v_leak) - v + f(node.r) * x[t])
        elif isinstance(node, (nir.CubaLIF, nir.CubaLI)):
            i = i + dt / f(node.tau_syn) * (-i + f(node.w_in) * x[t])
            v = v + dt / f(node.tau_mem) * (f(node.v_leak) - v + f(node.r) * i)
        else:  # IF, I
            v = v + dt * f(node.r) * x[t]
        if isinstance(node, (nir.LIF, nir.CubaLIF, nir.IF)):
            z = (v > f(node.v_threshold)).to(x.dtype)
            v = (1 - z) * v + z * f(node.v_reset)
            out.append(z)
        else:
            out.append(v)
    return torch.stack(out)


def test_recurrent_graph_steps(device):
    """LIF <-> Linear cycle (snnTorch's RLeaky export shape): one step at a
    time, reading the previous step's output; warned once."""
    n = 3
    w = np.array([[0.0, 0.5, -0.3], [0.2, 0.0, 0.4], [-0.1, 0.3, 0.0]], np.float32)
    tau = np.full(n, 1e-3)
    graph = nir.NIRGraph(nodes={
        "input": nir.Input(np.array([n])),
        "lif": nir.LIF(tau=tau, r=tau / 1e-4, v_leak=np.zeros(n), v_threshold=np.ones(n),
                       v_reset=np.zeros(n)),
        "rec": nir.Linear(weight=w), "output": nir.Output(np.array([n]))},
        edges=[("input", "lif"), ("lif", "rec"), ("rec", "lif"), ("lif", "output")],
        type_check=False)
    m = fnir.load(graph, dt=1e-4).to(device)
    x = torch.rand(20, 2, n, device=device) * 1.2
    with pytest.warns(fnir.RecurrentGraphWarning):
        y = m(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m(x)  # once
    beta = 1 - 1e-4 / 1e-3
    v = torch.zeros(2, n, device=device)
    s = torch.zeros(2, n, device=device)
    wt = torch.from_numpy(w).to(device)
    for t in range(20):
        v = beta * v + (x[t] + s @ wt.T)
        s = (v > 1).float()
        v = (1 - s) * v
        torch.testing.assert_close(y[t], s)


def test_snntorch_rleaky_export_runs_as_snntorch_imports(device, tmp_path):
    """snnTorch exports RLeaky as a subgraph with a LIF <-> Linear cycle:
    inlined and run step by step, as snnTorch's importer runs it."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(4, 5),
        snn.RLeaky(beta=torch.full((5,), 0.9), V=torch.linspace(-0.5, 0.5, 5),
                   all_to_all=False, threshold=torch.ones(5), init_hidden=True),
        torch.nn.Linear(5, 3),
        snn.Leaky(torch.full((3,), 0.8), threshold=torch.ones(3), init_hidden=True))
    with torch.no_grad():
        net[2].weight.mul_(6)
        net[2].bias.fill_(0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = export_to_nir(net, torch.randn(4))
        ref = import_from_nir(graph)
    x = torch.randn(20, 6, 4) * 4 + 3
    want = _step_graph_module(ref, x)
    with pytest.warns(fnir.RecurrentGraphWarning):
        loaded = fnir.load(graph, dt=1e-4).to(device)
        got = loaded(x.to(device)).cpu()
    assert want.sum() > 0
    torch.testing.assert_close(got, want)
    # saved flat (the subgraph's own Input/Output bypassed) and loaded again
    path = tmp_path / "rleaky.nir"
    fnir.save(loaded, path, dt=1e-4)
    flat = nir.read(path)
    assert not any(isinstance(n, nir.NIRGraph) for n in flat.nodes.values())
    with pytest.warns(fnir.RecurrentGraphWarning):
        again = fnir.load(path, dt=1e-4).to(device)(x.to(device)).cpu()
    torch.testing.assert_close(again, want)


def test_bad_graphs():
    n = 3
    good = {"input": nir.Input(np.array([n])), "output": nir.Output(np.array([n]))}
    with pytest.raises(fnir.NIRGraphError, match="unknown node 'nope'"):
        fnir.load(nir.NIRGraph(nodes=dict(good), edges=[("input", "nope")],
                               type_check=False), dt=1e-3)
    with pytest.raises(fnir.NIRGraphError, match="'w' takes 4 inputs but node 'lif' gives 3"):
        fnir.load(nir.NIRGraph(nodes={**good, "lif": nir.LIF(
            tau=np.ones(n), r=np.ones(n), v_leak=np.zeros(n), v_threshold=np.ones(n)),
            "w": nir.Linear(weight=np.ones((3, 4), np.float32))},
            edges=[("input", "lif"), ("lif", "w"), ("w", "output")], type_check=False),
            dt=1e-3)
    with pytest.raises(fnir.NIRGraphError, match="'lif'.*tau must be > 0"):
        fnir.load(nir.NIRGraph(nodes={**good, "lif": nir.LIF(
            tau=-np.ones(n), r=np.ones(n), v_leak=np.zeros(n), v_threshold=np.ones(n))},
            edges=[("input", "lif"), ("lif", "output")], type_check=False), dt=1e-3)
    with pytest.raises(fnir.NIRGraphError, match="'lif'.*has shape"):
        m = fnir.load(nir.NIRGraph(nodes={**good, "lif": nir.LIF(
            tau=np.ones(5), r=np.ones(5), v_leak=np.zeros(5), v_threshold=np.ones(5))},
            edges=[("input", "lif"), ("lif", "output")], type_check=False), dt=1e-3)
        m(torch.ones(2, 1, n))
    with pytest.raises(ValueError, match="dt must be"):
        fnir.load(nir.NIRGraph(nodes=dict(good), edges=[("input", "output")],
                               type_check=False), dt=0)
    with pytest.raises(fnir.NIRGraphError, match="exactly one Input"):
        fnir.load(nir.NIRGraph(nodes={"output": good["output"]}, edges=[],
                               type_check=False), dt=1e-3)
    class Unknown:  # not a NIR node type flexsn knows
        pass
    with pytest.raises(fnir.NIRGraphError, match="node 'u': flexsn.nir has no mapping for Unknown"):
        fnir.load(nir.NIRGraph(nodes={**good, "u": Unknown()},
                               edges=[("input", "u"), ("u", "output")], type_check=False),
                  dt=1e-3)
    with pytest.raises(ValueError, match="no NIR node for module '0'"):
        fnir.to_graph(torch.nn.Sequential(torch.nn.GRU(2, 2)), dt=1e-3)
