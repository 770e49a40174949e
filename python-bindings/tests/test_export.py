"""Models with our kernels through torch.export: exported (the training IR,
whose graphs hold flexsn_native.train), run from ep.module() in the same
process, saved, and loaded and run in a fresh process where only torch and
flexsn were imported: the same outputs and the same gradients of the input
and every parameter as the eager model. A graph names each binding by a key
and carries its recipe (the program's IR and options, the entry, the
layout; checksummed): a damaged or foreign recipe is an error that says
so."""

import os
import subprocess
import warnings

import pytest
import torch
from torch import nn
from torch.utils._pytree import tree_leaves

import flexsn
from conftest import DEVICES, child_python

snn = pytest.importorskip("snntorch")
nt = pytest.importorskip("norse.torch")
sj = pytest.importorskip("spikingjelly.activation_based")


class _Tutorial5(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.lif1 = nn.Linear(16, 32), snn.Leaky(beta=0.9)
        self.fc2, self.lif2 = nn.Linear(32, 4), snn.Leaky(beta=0.9)

    def reset(self):
        self.mem1, self.mem2 = self.lif1.init_leaky(), self.lif2.init_leaky()

    def forward(self, x):
        s1, self.mem1 = self.lif1(self.fc1(x), self.mem1)
        s2, self.mem2 = self.lif2(self.fc2(s1), self.mem2)
        return s2


def _spikingjelly():
    from spikingjelly.activation_based import functional, layer, neuron
    net = nn.Sequential(layer.Linear(16, 32), neuron.LIFNode(), layer.Linear(32, 4))
    functional.set_step_mode(net, "m")
    return flexsn.convert(net)


def _model(name, device):
    """(model, reset) of each form the package runs."""
    torch.manual_seed(0)
    if name == "flexsn":
        m = nn.Sequential(nn.Linear(16, 32), flexsn.neuron.LIFNode(step_mode="m"),
                          nn.Linear(32, 4)).to(device)
        return m, lambda: m[1].reset()
    if name == "spikingjelly":
        from spikingjelly.activation_based import functional
        m = _spikingjelly().to(device)
        return m, lambda: functional.reset_net(m)
    if name == "snntorch":
        step = _Tutorial5().to(device)
        return flexsn.multistep(step), step.reset
    m = _NorseOutput().to(device)
    return m, lambda: None


class _NorseOutput(nn.Module):
    """A Norse LIF layer's spikes: its state is a namedtuple of Norse's,
    which torch.export saves only once registered with its pytree."""

    def __init__(self):
        super().__init__()
        self.fc, self.lif = nn.Linear(16, 32), flexsn.from_norse(nt.LIF())

    def forward(self, x):
        return self.lif(self.fc(x))[0]


MODELS = ["flexsn", "spikingjelly", "snntorch", "norse"]


def _run(module, x):
    """(outputs, gradients of x and of each named parameter) of one call."""
    x = x.detach().clone().requires_grad_()
    outs = [t for t in tree_leaves(module(x)) if isinstance(t, torch.Tensor)]
    loss = sum((o.float() * (1 + torch.arange(o.numel(), device=o.device).view(o.shape)
                             % 3)).sum() for o in outs)
    names, params = zip(*module.named_parameters())
    grads = torch.autograd.grad(loss, [x, *params], allow_unused=True)
    return [o.detach() for o in outs], dict(zip(("x",) + names, grads))


FRESH = r"""
import sys, torch, flexsn
torch.backends.cudnn.deterministic = True
ep = torch.export.load(sys.argv[1])
x, want_outs, want_grads = torch.load(sys.argv[2])
sys.path.insert(0, {tests!r})
from test_export import _run
outs, grads = _run(ep.module(), x)
for a, b in zip(outs, want_outs):
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
for k, g in want_grads.items():
    torch.testing.assert_close(grads[k], g, rtol=1e-5, atol=1e-5)
print("same", len(outs), len(grads))
"""


def _fresh(argv, env, path, data, tests):
    return subprocess.run(argv + ["-c", FRESH.format(tests=tests), str(path), str(data)],
                          env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", MODELS)
def test_export_save_load_in_a_fresh_process(tmp_path, device, name):
    device = torch.device(device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, reset = _model(name, device)
        x = torch.rand(5, 3, 16, device=device) * 2
        reset()
        ep = torch.export.export(model, (x,))
        reset()
        want = _run(model, x)
    assert not [n for n in ep.graph.nodes if n.op == "call_function"
                and "flexsn_native" in str(n.target)
                and str(n.target).split(".")[1] not in ("train", "launch")]
    got = _run(ep.module(), x)  # the same process
    for a, b in zip(got[0], want[0]):
        torch.testing.assert_close(a, b)
    path, data = tmp_path / "model.pt2", tmp_path / "data.pt"
    torch.export.save(ep, path)
    torch.save((x, *want), data)
    argv, env = child_python()
    out = _fresh(argv, env, path, data, os.path.dirname(os.path.abspath(__file__)))
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1].startswith("same")


def _recipes(ep):
    return [n for n in ep.graph.nodes if n.op == "call_function"
            and str(n.target).startswith("flexsn_native") and len(n.args) > 2]


def _lying(recipe: str) -> str:
    """`recipe` whose first read claims one element where the kernel reads
    a sequence, checksummed anew: what someone writing a recipe by hand
    could make."""
    from flexsn import _recipes as recipes
    body = recipes.recipe_text(recipe).split("\n", 1)[1]
    lines = body.split("\n")
    at = next(i for i, l in enumerate(lines) if l.startswith("reads ")) + 1
    slot, pos, dtype, shape, optional, *name = lines[at].split(" ")
    lines[at] = " ".join([slot, pos, dtype, "2", optional, *name])
    return recipes.recipe("\n".join(lines))


@pytest.mark.parametrize("damage, message", [
    ("checksum", "fails its checksum"),
    ("version", "made by another version"),
    ("line break", "a line break"),
    ("missing", "no bound training"),
    ("lying", "is not what it says"),
])
def test_a_damaged_artifact_is_an_error(tmp_path, damage, message):
    """A recipe changed after it was made (one byte of its IR), of another
    format version, missing, or written to lie about the kernel's layout
    (with a valid checksum): the loaded model raises an error that says so,
    in a fresh process; never a crash, another kernel or a read out of
    bounds."""
    model, reset = _model("flexsn", torch.device("cpu"))
    x = torch.rand(5, 3, 16) * 2
    reset()
    ep = torch.export.export(model, (x,))
    (node,) = _recipes(ep)
    recipe = node.args[2]
    if damage == "checksum":
        at = recipe.index("flexsn.scan") if "flexsn.scan" in recipe else len(recipe) // 2
        recipe = recipe[:at] + recipe[at:].replace("flexsn.scan", "flexsn.scam", 1)
    elif damage == "version":
        recipe = recipe.replace(f"flexsn-recipe {flexsn._recipes.RECIPE_VERSION}",
                                "flexsn-recipe 9", 1)
    elif damage == "line break":
        recipe = recipe.replace("\\n", "\n", 1)
    elif damage == "lying":
        recipe = _lying(recipe)
    else:
        recipe = ""
    node.args = node.args[:2] + (recipe,)
    path, data = tmp_path / "model.pt2", tmp_path / "data.pt"
    torch.export.save(ep, path)
    torch.save((x, [], {}), data)
    argv, env = child_python()
    out = _fresh(argv, env, path, data, os.path.dirname(os.path.abspath(__file__)))
    assert out.returncode == 1, (out.returncode, out.stderr[-3000:])
    assert message in out.stderr, out.stderr[-3000:]


def test_deploy_page_runs(tmp_path, monkeypatch):
    """docs/deploy.md's Python blocks, in order, as one program."""
    import re
    from pathlib import Path
    text = (Path(__file__).parents[2] / "docs" / "deploy.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 3
    monkeypatch.chdir(tmp_path)
    exec(compile("\n".join(blocks), "docs/deploy.md", "exec"), {"__name__": "deploy_page"})  # noqa: S102


AOTI_FRESH = r"""
import sys, torch, flexsn
torch.backends.cudnn.deterministic = True
runner = torch._inductor.aoti_load_package(sys.argv[1])
x, want = torch.load(sys.argv[2])
got = runner(x)
torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
print("same")
"""


def _aoti_package(tmp_path, device, name="flexsn"):
    """(package path, input, the eager model's output) of an AOTInductor
    package of one model."""
    model, reset = _model(name, device)
    x = torch.rand(5, 3, 16, device=device) * 2
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reset()
        ep = torch.export.export(model, (x,))
        reset()
        want = model(x)
        want = want[0] if isinstance(want, tuple) else want
    path = torch._inductor.aoti_compile_and_package(
        ep, package_path=str(tmp_path / f"{name}-{device.type}.pt2"))
    return path, x, want


@pytest.mark.parametrize("device", DEVICES)
def test_aoti_package_in_a_fresh_process(tmp_path, device):
    device = torch.device(device)
    path, x, want = _aoti_package(tmp_path, device)
    torch.save((x, want), tmp_path / "data.pt")
    argv, env = child_python()
    out = subprocess.run(argv + ["-c", AOTI_FRESH, path, str(tmp_path / "data.pt")],
                         env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "same"


@pytest.mark.parametrize("device", DEVICES)
def test_cpp_example_runs_a_package(tmp_path, device):
    """examples/deploy built against the wheel's libtorch (CMake, Ninja) runs
    the package from C++ alone, with Python's numbers."""
    import shutil
    from pathlib import Path
    from flexsn import _capi, _native
    if not (shutil.which("cmake") and shutil.which("ninja")):
        pytest.skip("cmake and ninja are needed to build the example")
    device = torch.device(device)
    path, x, want = _aoti_package(tmp_path, device)
    source = Path(__file__).parents[2] / "examples" / "deploy"
    build = tmp_path / "build"
    for cmd in (["cmake", "-S", str(source), "-B", str(build), "-G", "Ninja",
                 f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}"],
                ["ninja", "-C", str(build)]):
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    data = tmp_path / "input.txt"
    values = x.cpu().flatten().tolist()
    data.write_text(" ".join(map(str, x.shape)) + "\n" + "\n".join(f"{v:.9g}" for v in values))
    ops = _native.status().split()[1]
    env = dict(os.environ, FLEXSN_LIBRARY=_capi.library_path())
    r = subprocess.run([str(build / "run_package"), ops, path, str(data)]
                       + (["cuda"] if device.type == "cuda" else []),
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.split("\n")
    got = torch.tensor([float(v) for v in lines[1:] if v]).view(
        [int(v) for v in lines[0].split()])
    torch.testing.assert_close(got, want.cpu(), rtol=1e-6, atol=1e-6)


def test_tracing_leaves_no_fake_values_behind():
    """A Norse layer whose parameters it copies to the input's dtype (or
    device) keeps those copies between calls; an export in between must not
    leave the trace's fake copies there for the next eager call."""
    import copy
    torch.manual_seed(0)
    lif = flexsn.from_norse(nt.LIF())
    ref = copy.deepcopy(lif)
    x = torch.rand(5, 3, 8, dtype=torch.float64) * 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.export.export(lif, (x,))
    torch.testing.assert_close(lif(x)[0], ref(x)[0])


@pytest.mark.parametrize("device", DEVICES)
def test_converted_spiking_resnet18_exports(tmp_path, device, monkeypatch):
    """SpikingJelly's spiking ResNet-18 (LIF), converted: exported, run in
    the same process and, saved, in a fresh one, with the eager model's
    outputs and gradients. cuDNN picks deterministic convolutions: its
    other weight gradients sum in an order that changes from run to run."""
    monkeypatch.setattr(torch.backends.cudnn, "deterministic", True)
    pytest.importorskip("spikingjelly.activation_based.model.spiking_resnet")  # torchvision
    from spikingjelly.activation_based import functional, neuron, surrogate
    from spikingjelly.activation_based.model import spiking_resnet
    torch.manual_seed(0)
    ref = spiking_resnet.spiking_resnet18(spiking_neuron=neuron.LIFNode, num_classes=10,
                                          tau=2.0, surrogate_function=surrogate.ATan())
    functional.set_step_mode(ref, "m")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = flexsn.convert(ref).to(device)
        x = torch.rand(2, 2, 3, 32, 32, device=device)
        functional.reset_net(model)
        ep = torch.export.export(model, (x,))
        functional.reset_net(model)
        want = _run(model, x)
    got = _run(ep.module(), x)
    for a, b in zip(got[0], want[0]):
        torch.testing.assert_close(a, b)
    for k, g in want[1].items():
        if g is not None:
            torch.testing.assert_close(got[1][k], g, rtol=1e-4, atol=1e-5)
    path, data = tmp_path / "resnet18.pt2", tmp_path / "data.pt"
    torch.export.save(ep, path)
    torch.save((x, want[0], {k: g for k, g in want[1].items() if g is not None}), data)
    argv, env = child_python()
    out = _fresh(argv, env, path, data, os.path.dirname(os.path.abspath(__file__)))
    assert out.returncode == 0, out.stderr[-3000:]


def test_importing_flexsn_after_torch_registers_the_operators():
    """`import torch, flexsn` registers the operators (a saved graph naming
    them loads); `import flexsn` alone still imports neither torch nor the
    library."""
    argv, env = child_python()
    code = ("import sys, torch, flexsn\n"
            "print(hasattr(torch.ops.flexsn_native, 'launch'))\n")
    out = subprocess.run(argv + ["-c", code], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0 and out.stdout.split()[-1] == "True", out.stderr[-2000:]
    code = "import sys, flexsn\nprint('torch' in sys.modules)\n"
    out = subprocess.run(argv + ["-c", code], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0 and out.stdout.split()[-1] == "False", out.stderr[-2000:]


def test_a_recipe_is_one_line_that_keeps_any_text():
    """A graph's recipe argument holds no line break (Inductor copies it
    into comments of the Triton code it generates), and its text comes
    back whole, backslashes and carriage returns included."""
    from flexsn import _recipes as recipes
    model, reset = _model("flexsn", torch.device("cpu"))
    reset()
    ep = torch.export.export(model, (torch.rand(5, 3, 16),))
    (node,) = _recipes(ep)
    assert "\n" not in node.args[2] and "\r" not in node.args[2]
    body = 'kernel 1 cpu f 2 2\nir 9\n"a\\\\n\\b"\r\n\\'
    assert recipes.recipe_text(recipes.recipe(body)).split("\n", 1)[1] == body
    for bad in ("x\\q", "x\\"):
        with pytest.raises(RuntimeError, match="a bad escape"):
            recipes.recipe_text(bad)
