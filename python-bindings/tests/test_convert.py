"""flexsn.convert: every converted SpikingJelly 2.0 neuron class against
SpikingJelly's own module (outputs, v_seq, final memories, gradients of the
input and of every parameter), the model zoo, a user's own BaseNode, the
module behaviours SpikingJelly users rely on, and bad input."""

import copy
import gc
import io
import re
import warnings
from pathlib import Path

import pytest
import torch
from torch import nn

import flexsn
from flexsn.spikingjelly import ConversionReport

sj_neuron = pytest.importorskip("spikingjelly.activation_based.neuron")
from spikingjelly.activation_based import functional, surrogate  # noqa: E402
from spikingjelly.activation_based.neuron import base_node  # noqa: E402

N = sj_neuron
RTOL, ATOL = 1e-5, 1e-6

# Each converted class with its default arguments and non-default ones.
VARIANTS = {
    "IFNode": [{}, dict(v_reset=None, detach_reset=True, surrogate_function=surrogate.ATan())],
    "LIFNode": [{}, dict(tau=3.0, decay_input=False, v_reset=None, detach_reset=True,
                         surrogate_function=surrogate.ATan(alpha=3.0))],
    "ParametricLIFNode": [{}, dict(init_tau=3.0, decay_input=False, v_reset=None,
                                   surrogate_function=surrogate.ATan())],
    "SimpleIFNode": [{}, dict(v_reset=None, detach_reset=True)],
    "SimpleLIFNode": [dict(tau=2.0, decay_input=True),
                      dict(tau=3.0, decay_input=False, detach_reset=True, v_reset=-0.1)],
    "HalfThresholdIFNode": [{}],
    "ActivationAwareIFNode": [{}, dict(v_threshold=0.8, v_offset=0.1, v_reset=0.0)],
    "IzhikevichNode": [{}],
    "QIFNode": [{}, dict(tau=3.0, v_c=0.6, a0=1.5)],
    "EIFNode": [{}, dict(tau=3.0, delta_T=0.8)],
    "RAFNode": [{}],
    "TernaryIFNode": [{}],
    "TernaryLIFNode": [{}],
    "KLIFNode": [{}, dict(scale_reset=True)],
    "ComplementaryLIFNode": [{}],
    "CUBALIFNode": [{}],
    "LIAFNode": [dict(act=nn.ReLU(), threshold_related=True),
                 dict(act=nn.Tanh(), threshold_related=False, tau=3.0)],
    "SLTTLIFNode": [{}],
    "ILIFNode": [{}, dict(tau=1.5, surrogate_function=surrogate.MultiLevelSpikeCount(2))],
    "STBIFNode": [dict(q_threshold=torch.tensor(1.0), level=4),
                  dict(q_threshold=torch.tensor(0.5), level=8, sym=True)],
}
# SpikingJelly runs STBIFNode (SpikeZIP's quantized inference neuron) only
# without gradients.
INFERENCE_ONLY = {"STBIFNode"}
# SpikingJelly 2.0.0's LIAFNode inherits LIFNode's multi-step path, which
# fires spikes; its single step (what flexsn compiles) outputs act(v).
SINGLE_STEP_REFERENCE = {"LIAFNode", "SLTTLIFNode"}  # SLTT refuses step mode "m"


def _make(name, kw, step_mode="m"):
    cls = getattr(N, name)
    if name == "SLTTLIFNode":  # it asserts step mode "s" at construction
        step_mode = "s"
    try:
        return cls(**copy.deepcopy(kw), step_mode=step_mode)
    except TypeError:
        node = cls(**copy.deepcopy(kw))
        node.step_mode = step_mode
        return node


def _reference(node, x):
    if type(node).__name__ in SINGLE_STEP_REFERENCE:
        node.step_mode = "s"
        outs = [node(x[t]) for t in range(x.shape[0])]
        return torch.stack(outs)
    return node(x)


def _variant_ids():
    return [(n, k) for n, vs in VARIANTS.items() for k in range(len(vs))]


@pytest.mark.parametrize("T", [1, 5, 32])
@pytest.mark.parametrize("name,k", _variant_ids(), ids=lambda v: str(v))
def test_class_matches_spikingjelly(device, name, k, T):
    torch.manual_seed(T + 7 * k)
    ref = _make(name, VARIANTS[name][k]).to(device)
    if hasattr(ref, "store_v_seq") and name not in SINGLE_STEP_REFERENCE:
        ref.store_v_seq = True
    ours = flexsn.convert(ref)  # a converted deep copy
    assert type(ours).__mro__[1] is flexsn.spikingjelly._Fused
    ours.step_mode = "m"
    x = torch.randn(T, 3, 8, device=device) * 0.9 + 0.7
    if name not in INFERENCE_ONLY:
        x.requires_grad_()
    want = _reference(ref, x)
    got = ours(x)
    torch.testing.assert_close(got, want, rtol=RTOL, atol=ATOL)
    for (key, a), b in zip(ref._memories.items(), ours._memories.values()):
        if isinstance(a, torch.Tensor):
            torch.testing.assert_close(b, a, rtol=RTOL, atol=ATOL, msg=key)
    if getattr(ref, "v_seq", None) is not None:  # (some classes' own paths keep none)
        torch.testing.assert_close(ours.v_seq, ref.v_seq, rtol=RTOL, atol=ATOL)
    if name in INFERENCE_ONLY:
        return
    w = torch.randn_like(want)
    params_r = [p for p in ref.parameters() if p.requires_grad]
    params_o = [p for p in ours.parameters() if p.requires_grad]
    loss_r = (want * w).sum() + sum(m.sum() for m in ref._memories.values()
                                    if isinstance(m, torch.Tensor))
    loss_o = (got * w).sum() + sum(m.sum() for m in ours._memories.values()
                                   if isinstance(m, torch.Tensor))
    gr = torch.autograd.grad(loss_r, [x] + params_r, allow_unused=True)
    go = torch.autograd.grad(loss_o, [x] + params_o, allow_unused=True)
    for a, b in zip(gr, go):
        if a is None:
            assert b is None or not b.any()
            continue
        torch.testing.assert_close(b, a, rtol=RTOL, atol=ATOL * max(1.0, a.abs().max().item()))


# --------------------------------------------------------------------------
# What converts: the table in docs/convert.md is the code's
# --------------------------------------------------------------------------

CTOR_ARGS = {
    "SimpleLIFNode": dict(tau=2.0, decay_input=True),
    "LIAFNode": dict(act=nn.ReLU(), threshold_related=True),
    "STBIFNode": dict(q_threshold=torch.tensor(1.0), level=4),
    "PSN": dict(T=4), "MaskedPSN": dict(k=2, T=4), "SlidingPSN": dict(k=2),
    "GatedLIFNode": dict(T=4),
}


def _outcome(cls):
    reason = flexsn.spikingjelly._left_reason_of_class(cls)
    if reason is not None:
        return "left"
    node = cls(**CTOR_ARGS.get(cls.__name__, {}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, report = flexsn.convert(node, report=True)
    return "converted" if report.rows[0][2] == "converted" else "left"


def _classes():
    import inspect
    return [c for c in vars(N).values() if inspect.isclass(c) and issubclass(c, nn.Module)
            and c.__module__.startswith("spikingjelly")]


def test_docs_table_is_the_code():
    text = (Path(__file__).parents[2] / "docs" / "convert.md").read_text()
    table = dict(re.findall(r"^\| `(\w+)` \| (converted|left) \|", text, re.M))
    classes = _classes()
    assert len(classes) == 49 and set(table) == {c.__name__ for c in classes}
    for cls in classes:
        assert _outcome(cls) == table[cls.__name__], cls.__name__
    assert {n for n, v in table.items() if v == "converted"} == set(VARIANTS)


# --------------------------------------------------------------------------
# The model zoo
# --------------------------------------------------------------------------

ZOO_NEURONS = {
    "IF": (N.IFNode, dict(detach_reset=True)),
    "LIF": (N.LIFNode, dict(tau=2.0, surrogate_function=surrogate.ATan())),
    "PLIF": (N.ParametricLIFNode, dict(v_reset=None)),
    "KLIF": (N.KLIFNode, {}),
    "Izhikevich": (N.IzhikevichNode, {}),
}


def _zoo(model_name, neuron):
    from spikingjelly.activation_based.model import sew_resnet, spiking_resnet, spiking_vgg
    cls, kw = ZOO_NEURONS[neuron]
    torch.manual_seed(0)
    if model_name == "spiking_resnet18":
        m = spiking_resnet.spiking_resnet18(spiking_neuron=cls, num_classes=10, **kw)
    elif model_name == "sew_resnet18":
        m = sew_resnet.sew_resnet18(spiking_neuron=cls, num_classes=10, cnf="ADD", **kw)
    else:
        m = spiking_vgg.spiking_vgg11_bn(spiking_neuron=cls, num_classes=10, **kw)
    functional.set_step_mode(m, "m")
    return m


@pytest.fixture
def deterministic():
    """Convolutions without TF32 and with deterministic algorithms: two runs
    of one model on a GPU give the same gradients, so that what is compared
    is the neurons."""
    saved = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32,
             torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark)
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
    yield
    (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32,
     torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark) = saved


@pytest.mark.parametrize("model_name,neuron", [
    ("spiking_resnet18", "LIF"), ("spiking_resnet18", "IF"), ("sew_resnet18", "PLIF"),
    ("sew_resnet18", "KLIF"), ("spiking_vgg11_bn", "Izhikevich"), ("spiking_vgg11_bn", "LIF")])
def test_model_zoo(device, model_name, neuron, deterministic):
    pytest.importorskip("spikingjelly.activation_based.model.spiking_resnet")  # needs torchvision
    ref = _zoo(model_name, neuron).to(device)
    ours, report = flexsn.convert(ref, report=True)
    assert report.converted and not report.left
    x = torch.rand(4, 2, 3, 32, 32, device=device)
    target = torch.tensor([3, 7], device=device)
    losses, grads = [], []
    for m in (ref, ours):
        functional.reset_net(m)
        torch.manual_seed(1)  # the same dropout masks (VGG's classifier)
        loss = nn.functional.cross_entropy(m(x).mean(0), target)
        losses.append(loss)
        grads.append(torch.autograd.grad(loss, [p for p in m.parameters()], allow_unused=True))
    torch.testing.assert_close(losses[1], losses[0], rtol=RTOL, atol=ATOL)
    for (name, _), a, b in zip(ref.named_parameters(), *grads):
        if a is None:
            continue
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5 * max(1.0, a.abs().max().item()),
                                   msg=lambda m, name=name: f"{name}: {m}")


# --------------------------------------------------------------------------
# A user's own neuron
# --------------------------------------------------------------------------

class AdaptiveThresholdNode(base_node.BaseNode):
    """Written only here: an adaptive threshold (extra memory ``b``) and a
    learnable leak."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.leak = nn.Parameter(torch.tensor(0.8))
        self.register_memory("b", 0.0)

    def materialize_states(self, inputs, states, step_mode):
        v, b = super().materialize_states(inputs, states, step_mode)
        if not isinstance(b, torch.Tensor) or b.shape != v.shape:
            b = torch.zeros_like(v)
        return v, b

    def single_step_functional_forward(self, inputs, states, **kwargs):
        x = inputs[0]
        v, b = states
        h = torch.sigmoid(self.leak) * v + x
        spike = self.surrogate_function(h - self.v_threshold - b)
        b = 0.9 * b + 0.2 * spike
        v = h * (1.0 - spike)
        return (spike,), (v, b)


def test_user_subclass(device):
    torch.manual_seed(3)
    ref = AdaptiveThresholdNode(step_mode="m").to(device)
    ours = flexsn.convert(ref)
    x = (torch.randn(20, 4, 5, device=device) + 0.8).requires_grad_()
    want, got = ref(x), ours(x)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(ours.b, ref.b)
    gr = torch.autograd.grad(want.sum() + ref.v.sum(), [x, ref.leak])
    go = torch.autograd.grad(got.sum() + ours.v.sum(), [x, ours.leak])
    for a, b in zip(gr, go):
        torch.testing.assert_close(b, a, rtol=RTOL, atol=ATOL)


# --------------------------------------------------------------------------
# Behaviour SpikingJelly users rely on
# --------------------------------------------------------------------------

def _net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), N.LIFNode(step_mode="m"), nn.Linear(8, 4),
                         N.ParametricLIFNode(step_mode="m", store_v_seq=True))


def test_state_dict_both_ways():
    net = _net()
    ours = flexsn.convert(net)
    assert list(ours.state_dict()) == list(net.state_dict())
    other = _net()
    with torch.no_grad():
        other[3].w.fill_(0.3)
    ours.load_state_dict(other.state_dict())
    assert ours[3].w.item() == pytest.approx(0.3)
    net.load_state_dict(ours.state_dict())
    assert net[3].w.item() == pytest.approx(0.3)


def test_step_modes_reset_and_memories():
    net = _net()
    ours = flexsn.convert(net)
    x = torch.randn(5, 2, 6) * 2
    y_m = ours(x)
    assert ours[3].v_seq.shape == (5, 2, 4) and ours[1].v.shape == (2, 8)
    functional.reset_net(ours)
    assert not isinstance(ours[1].v, torch.Tensor) or not ours[1].v.any()
    functional.set_step_mode(ours, "s")
    y_s = torch.stack([ours(x[t]) for t in range(5)])
    torch.testing.assert_close(y_s, y_m)
    functional.detach_net(ours)


def test_copies_devices_and_dtypes(tmp_path):
    net = flexsn.convert(_net())
    x = torch.randn(5, 2, 6) * 2
    want = net(x)
    for other in (copy.deepcopy(net), _reload(net)):
        functional.reset_net(other)
        torch.testing.assert_close(other(x), want)
    half = copy.deepcopy(net).to(torch.float64)
    functional.reset_net(half)
    torch.testing.assert_close(half(x.double()).float(), want)
    net.eval()
    functional.reset_net(net)
    torch.testing.assert_close(net(x), want)


def _reload(model):
    buf = io.BytesIO()
    torch.save(model, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=False)


def test_autocast_bf16():
    net = flexsn.convert(_net())
    ref = _net()
    x = torch.randn(5, 2, 6) * 2
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = net(x)
        want = ref(x)
    assert got.dtype == want.dtype
    assert (got.float() - want.float()).abs().mean() < 0.05


def test_torch_compile_fullgraph():
    net = flexsn.convert(_net())
    x = torch.randn(5, 2, 6) * 2
    want = net(x)
    functional.reset_net(net)
    compiled = torch.compile(net, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(x), want)


def test_report_idempotence_and_bad_input():
    net = _net()
    ours, report = flexsn.convert(net, report=True)
    assert isinstance(report, ConversionReport) and len(report.converted) == 2
    assert "LIFNode: converted" in str(report)
    again, report2 = flexsn.convert(ours, report=True)
    assert [r[2] for r in report2.rows] == ["already converted"] * 2
    with pytest.raises(TypeError, match="nn.Module"):
        flexsn.convert(lambda x: x)
    with pytest.warns(UserWarning, match="no SpikingJelly neuron"):
        flexsn.convert(nn.Linear(2, 2))
    with pytest.warns(flexsn.FallbackWarning, match="PSN.*parallel over T"):
        flexsn.convert(nn.Sequential(N.PSN(T=4)))
    with pytest.raises(flexsn.UnsupportedOpError, match="PSN cannot be converted"):
        flexsn.convert(nn.Sequential(N.PSN(T=4)), strict=True)
    assert flexsn.convert(net, inplace=True) is net and type(net[1]) is not N.LIFNode


class CrossNeuronNode(base_node.BaseNode):
    def single_step_functional_forward(self, inputs, states, **kwargs):
        v = states[0] + inputs[0] - inputs[0].cumsum(-1)  # mixes neurons
        spike = self.surrogate_function(v - self.v_threshold)
        return (spike,), (v * (1 - spike),)


def test_unsupported_op_is_named():
    node = CrossNeuronNode(step_mode="m")
    with pytest.warns(flexsn.FallbackWarning, match=r"cumsum.*test_convert.py:\d+"):
        out = flexsn.convert(node)
    assert type(out) is CrossNeuronNode  # left as it is, still runs
    out(torch.randn(3, 2, 4))


def test_config_changes_are_read():
    node = flexsn.convert(N.LIFNode(step_mode="m"))
    x = torch.ones(4, 1) * 0.6
    before = node(x)
    node.reset()
    node.v_threshold = 0.5
    after = node(x)
    ref = N.LIFNode(step_mode="m", v_threshold=0.5)
    torch.testing.assert_close(after, ref(x))
    assert not torch.equal(before, after)


def test_functional_helpers_on_flexsn_neurons():
    """SpikingJelly's helpers work on flexsn's own IF/LIF/PLIF modules too."""
    net = nn.Sequential(nn.Linear(4, 5), flexsn.neuron.LIFNode(),
                        flexsn.neuron.ParametricLIFNode())
    functional.set_step_mode(net, "m")
    assert net[1].step_mode == "m" and net[2].step_mode == "m"
    y = net(torch.randn(6, 2, 4) * 3)
    assert y.shape == (6, 2, 5)
    functional.reset_net(net)
    assert net[1].sn.states is None
    functional.detach_net(net)
    with pytest.raises(ValueError, match="step_mode"):
        net[1].step_mode = "x"


class Block(nn.Sequential):
    pass


def _blocks():
    torch.manual_seed(0)
    return nn.Sequential(
        Block(nn.Linear(6, 8), N.LIFNode(step_mode="m")),
        Block(nn.Linear(8, 8), N.ParametricLIFNode(step_mode="m")),
        nn.Linear(8, 3))


def test_memopt_composes():
    """SpikingJelly's optimize_memory (selective checkpointing, spike
    compression) over converted neurons: the same loss and gradients."""
    memopt = pytest.importorskip("spikingjelly.activation_based.memopt")
    x = torch.randn(5, 4, 6) * 2
    plain = flexsn.convert(_blocks())
    opt = flexsn.convert(_blocks())
    memopt.optimize_memory(opt, (Block,), lambda m: m(x), level=1)
    results = []
    for m in (plain, opt):
        functional.reset_net(m)
        loss = m(x).square().mean()
        results.append((loss, torch.autograd.grad(loss, list(m.parameters()))))
    torch.testing.assert_close(results[1][0], results[0][0])
    for a, b in zip(results[0][1], results[1][1]):
        torch.testing.assert_close(b, a)


def test_ddp(tmp_path):
    """DistributedDataParallel (gloo, one process) over a converted model:
    the gradients of the model itself."""
    import torch.distributed as dist
    if not dist.is_available():
        pytest.skip("torch.distributed is not available")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/rendezvous",
                            rank=0, world_size=1)
    try:
        net = flexsn.convert(_blocks())
        ddp = nn.parallel.DistributedDataParallel(copy.deepcopy(net))
        x = torch.randn(5, 4, 6) * 2
        for m in (net, ddp):
            functional.reset_net(m)
            m(x).square().mean().backward()
        for a, b in zip(net.parameters(), ddp.module.parameters()):
            torch.testing.assert_close(b.grad, a.grad)
    finally:
        # the reducer before the process group: freed after it, it joins
        # gloo's threads forever
        ddp = m = None
        gc.collect()
        dist.destroy_process_group()


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_convert_a_cuda_model():
    """The self-check runs on CPU copies: a model already on the GPU converts."""
    net = _net().cuda()
    ours, report = flexsn.convert(net, report=True)
    assert len(report.converted) == 2
    x = torch.randn(5, 2, 6, device="cuda") * 2
    torch.testing.assert_close(ours(x), net(x))


def test_tracer_shape_and_in_place_ops():
    """What SpikingJelly's steps use: shape-only ops on a step (a T=1
    sequence's unsqueeze / unbind / stack / select) and in-place ops trace as
    their values; an index that would pick another neuron does not."""
    def core(x, v):
        h = torch.stack([(v + x).unsqueeze(0)[0]]).squeeze(0)
        (h2,) = h.unsqueeze(0).unbind(0)
        h2.mul_(0.5)
        s = flexsn.surrogate.ATan()(h2 - 1.0)
        r = h2.clone()
        r.relu_()
        return s, r.view(-1).reshape(r.shape) * (1 - s)
    x = torch.randn(6, 4) * 3
    got = flexsn.FlexSNKernel(core, 1, 1, strict=True)(x, torch.zeros(4))
    want = flexsn.FlexSNKernel(core, 1, 1, backend="torch")(x, torch.zeros(4))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)

    def mixes(x, v):
        h = torch.stack([x, v]).sum(0)  # two tensors: mixes values
        return h, h
    with pytest.raises(flexsn.UnsupportedOpError, match="stack/cat of 2 tensors"):
        flexsn.FlexSNKernel(mixes, 1, 1, strict=True)


LEGACY_SCRIPT = r"""
import torch, flexsn, warnings
warnings.simplefilter("ignore")
from spikingjelly.activation_based import neuron
assert not hasattr(neuron.BaseNode, "single_step_functional_forward")
make = {"IFNode": lambda: neuron.IFNode(),
        "LIFNode": lambda: neuron.LIFNode(tau=3., decay_input=False, v_reset=None,
                                          detach_reset=True),
        "ParametricLIFNode": neuron.ParametricLIFNode, "QIFNode": neuron.QIFNode,
        "EIFNode": neuron.EIFNode, "IzhikevichNode": neuron.IzhikevichNode,
        "KLIFNode": neuron.KLIFNode}
torch.manual_seed(0)
for name, f in make.items():
    ref = f()
    ours, report = flexsn.convert(ref, report=True)
    assert report.rows[0][2] == "converted", (name, report.rows)
    x = (torch.randn(16, 3, 5) * 0.9 + 0.7).requires_grad_()
    want = torch.stack([ref(x[t]) for t in range(16)])
    ours.step_mode = "m"
    got = ours(x)
    torch.testing.assert_close(got, want)
    gw = torch.autograd.grad(want.sum(), [x] + list(ref.parameters()))
    go = torch.autograd.grad(got.sum(), [x] + list(ours.parameters()))
    for a, b in zip(gw, go):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
print("legacy ok", len(make))
"""


def test_seeds_era_spikingjelly(tmp_path):
    """SpikingJelly 0.0.0.0.14 (PyPI; the neuronal_charge / fire / reset
    API on self.v): its nodes convert through the legacy path and match. It
    runs in the venv the test command makes (build/venv-sj14)."""
    import os
    import subprocess
    python = Path(__file__).parents[2] / "build" / "venv-sj14" / "bin" / "python"
    if not python.exists():
        pytest.skip("no build/venv-sj14 (scripts/python_deps.sh makes it)")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parents[1]))
    out = subprocess.run([str(python), "-c", LEGACY_SCRIPT], env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "legacy ok 7" in out.stdout
