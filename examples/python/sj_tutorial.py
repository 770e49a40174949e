"""SpikingJelly's FlexSN tutorial, run with flexsn: the examples of its
workflow, backward, minimal inference/training and torch.compile sections,
with `from flexsn import FlexSN` in place of SpikingJelly's FlexSN; then a
predefined neuron and SpikingJelly 2.0's static_inputs form. Needs a GPU
(as the tutorial does)."""

import torch
import torch.nn as nn

import flexsn
from flexsn import FlexSN, neuron, surrogate

torch.manual_seed(0)


def complicated_lif_core_generator(beta: float, gamma: float, spike_fn=surrogate.ATan()):
    def complicated_lif_core(x: torch.Tensor, y: torch.Tensor, v: torch.Tensor,
                             rho: torch.Tensor):
        h = beta * v + x
        s1 = spike_fn(h - (rho + 1.))
        s2 = spike_fn(h - 1.)
        rho = gamma * rho + s1
        v1 = h * (1. - s1)
        v2 = h - s2
        yy = torch.sigmoid(y)
        v = v1 * yy + v2 * (1. - yy)
        return s1, s2, v, rho
    return complicated_lif_core


def make(backend):
    return FlexSN(
        core=complicated_lif_core_generator(beta=0.5, gamma=0.9),
        num_inputs=2, num_states=2, num_outputs=2,
        example_inputs=tuple(torch.zeros([1], device="cuda") for _ in range(4)),
        requires_grad=(True, True, True, True),
        step_mode="m", backend=backend, store_state_seqs=True)


print("== FlexSN workflow")
f = make("inductor")
x = torch.randn([16, 3, 32, 32], device="cuda")
y = torch.randn([16, 3, 32, 32], device="cuda")
s1, s2 = f(x, y)
v, rho = f.state_seqs
print(s1.mean())
print(s2.mean())
print(v.mean())
print(rho.mean())

print("== backward: compiled kernels vs the torch loop")
n_inductor, n_torch = make("inductor"), make("torch")
x = torch.randn([16, 3, 32, 32], device="cuda")
y = torch.randn([16, 3, 32, 32], device="cuda")
x_inductor = x.clone().requires_grad_(True)
y_inductor = y.clone().requires_grad_(True)
x_torch = x.clone().requires_grad_(True)
y_torch = y.clone().requires_grad_(True)
s1_inductor, s2_inductor = n_inductor(x_inductor, y_inductor)
s1_torch, s2_torch = n_torch(x_torch, y_torch)
grad = torch.randn_like(s1_inductor)
s1_inductor.backward(grad)
s1_torch.backward(grad)
v_inductor, rho_inductor = n_inductor.state_seqs
v_torch, rho_torch = n_torch.state_seqs
assert torch.allclose(s1_inductor, s1_torch)
assert torch.allclose(s2_inductor, s2_torch)
assert torch.allclose(x_inductor.grad, x_torch.grad, atol=1e-6, rtol=1e-6)
assert torch.allclose(y_inductor.grad, y_torch.grad, atol=1e-6, rtol=1e-6)
assert torch.allclose(v_inductor, v_torch, atol=1e-6, rtol=1e-6)
assert torch.allclose(rho_inductor, rho_torch)
print(s1_inductor.mean())
print(s2_inductor.mean())
print(x_inductor.grad.mean())
print(y_inductor.grad.mean())
print(v_inductor.mean())
print(rho_inductor.mean())
print("all asserts pass")

print("== minimal inference (hard threshold) and torch.compile")


def lif_core(x: torch.Tensor, v: torch.Tensor):
    tau, v_th = 2.0, 1.0
    h = v + (x - v) / tau
    s = (h >= v_th).to(h.dtype)
    return s, h * (1.0 - s)


lif = FlexSN(core=lif_core, num_inputs=1, num_states=1, num_outputs=1, step_mode="m",
             backend="inductor").cuda()
x = torch.randn(8, 64, 512, device="cuda")
with torch.no_grad():
    out = lif(x)
print(out.shape, out.dtype, f"spike rate {out.mean().item():.4f}")
model = nn.Sequential(nn.Linear(512, 512), lif, nn.Linear(512, 512)).cuda()
print("graph breaks:", torch._dynamo.explain(model)(x).graph_break_count)
compiled = torch.compile(model, fullgraph=True)
lif.reset()
out_c = compiled(x)
lif.reset()
out_e = model(x)
print("compiled vs eager max |diff|:", (out_c - out_e).abs().max().item())

print("== minimal training (sigmoid surrogate)")
sg = surrogate.Sigmoid(alpha=4.0)


def lif_core_sg(x: torch.Tensor, v: torch.Tensor):
    tau, v_th = 2.0, 1.0
    h = v + (x - v) / tau
    s = sg(h - v_th)
    return s, h * (1.0 - s)


lif_sg = FlexSN(core=lif_core_sg, num_inputs=1, num_states=1, num_outputs=1,
                step_mode="m", backend="inductor").cuda()
x = torch.randn(8, 64, 512, device="cuda", requires_grad=True)
out = lif_sg(x)
out.sum().backward()
print(x.grad.shape)

print("== predefined neuron and SpikingJelly 2.0's form")
plif = neuron.ParametricLIFNode(init_tau=2.0, step_mode="m", store_v_seq=True).cuda()
s = plif(torch.rand(8, 64, 512, device="cuda") * 2)
s.mean().backward()
print("PLIF spike rate", round(s.mean().item(), 4), "| dL/dw", plif.w.grad.item(),
      "| v_seq", tuple(plif.v_seq.shape))
tau = nn.Parameter(torch.tensor([2.0], device="cuda"))
sn = FlexSN(lambda x, v, tau: (sg(v + (x - v) / tau - 1.),
                               (v + (x - v) / tau) * (1 - sg(v + (x - v) / tau - 1.))),
            num_states=1, static_inputs=(tau,))
sn(torch.randn(4, 32, device="cuda")).sum().backward()
print("2.0 form: inputs", sn.num_inputs, "outputs", sn.num_outputs, "| dL/dtau", tau.grad.item())
print(f"flexsn {flexsn.__version__}, {flexsn.library_version()}, "
      f"{torch.cuda.get_device_name()}")
