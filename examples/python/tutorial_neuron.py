"""The main job: SpikingJelly's tutorial neuron (two inputs, two states, two
outputs) written in PyTorch, compiled by flexsn and run forward and backward
on the GPU when there is one, else on the cpu backend; checked against the
same core run as a Python loop ("torch" backend), with timings."""

import time

import torch

import flexsn
from flexsn import surrogate


def complicated_lif_core_generator(beta: float, gamma: float, spike_fn=surrogate.ATan()):
    def complicated_lif_core(x, y, v, rho):
        h = beta * v + x
        s1 = spike_fn(h - (rho + 1.))   # spike, with threshold adaptation
        s2 = spike_fn(h - 1.)           # spike, without threshold adaptation
        rho = gamma * rho + s1          # adaptation variable update
        v1 = h * (1. - s1)              # hard reset
        v2 = h - s2                     # soft reset
        yy = torch.sigmoid(y)           # modulation factor
        v = v1 * yy + v2 * (1. - yy)    # modulated reset
        return s1, s2, v, rho
    return complicated_lif_core


def timed(fn, device, reps=20):
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t) / reps * 1e3


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    backend = device.type  # our kernels: PTX on the GPU, the CPU JIT otherwise
    print(f"flexsn {flexsn.__version__} ({flexsn.library_version()}), torch "
          f"{torch.__version__}, device {device}"
          + (f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else ""))
    print(f"call path: {flexsn.call_path()}")
    ex = tuple(torch.zeros(1, device=device) for _ in range(4))
    # PyTorch's own start-up stays out of the timing: CUDA's, and that of
    # its first backward with a gradient tensor (autograd then imports
    # torch.fx's symbolic shapes and sympy: 0.7 s on a laptop-class CPU).
    w = torch.ones(2, device=device, requires_grad=True)
    (w * 2).backward(torch.ones(2, device=device))
    if device.type == "cuda":
        torch.cuda.synchronize()
    kw = dict(num_inputs=2, num_states=2, num_outputs=2, example_inputs=ex,
              requires_grad=(True, True, True, True), step_mode="m",
              store_state_seqs=True)
    t0 = time.perf_counter()
    ours = flexsn.FlexSN(complicated_lif_core_generator(0.5, 0.9), backend=backend, **kw)
    ref = flexsn.FlexSN(complicated_lif_core_generator(0.5, 0.9), backend="torch", **kw)
    torch.manual_seed(0)
    x = torch.randn([16, 3, 32, 32], device=device)
    y = torch.randn([16, 3, 32, 32], device=device)
    xo, yo, xr, yr = (t.clone().requires_grad_(True) for t in (x, y, x, y))
    s1o, s2o = ours(xo, yo)
    grad = torch.randn_like(s1o)
    s1o.backward(grad)
    if device.type == "cuda":
        torch.cuda.synchronize()
    first = time.perf_counter() - t0
    s1r, s2r = ref(xr, yr)
    s1r.backward(grad)
    vo, rho_o = ours.state_seqs
    vr, rho_r = ref.state_seqs
    assert torch.allclose(s1o, s1r) and torch.allclose(s2o, s2r)
    assert torch.allclose(xo.grad, xr.grad, atol=1e-6, rtol=1e-6)
    assert torch.allclose(yo.grad, yr.grad, atol=1e-6, rtol=1e-6)
    assert torch.allclose(vo, vr, atol=1e-6, rtol=1e-6)
    assert torch.allclose(rho_o, rho_r)
    print("compiled == torch loop (the tutorial's asserts pass):")
    for name, t in [("s1", s1o), ("s2", s2o), ("x.grad", xo.grad), ("y.grad", yo.grad),
                    ("v", vo), ("rho", rho_o)]:
        print(f"  {name:7s} mean {t.mean().item():+.4e}")
    print(f"first use (build + trace + compile + load + forward + backward, "
          f"inputs made inside): {first:.2f} s")

    def train(m, a, b):
        m.reset()
        s1, s2 = m(a, b)
        (s1 * grad + s2).sum().backward()

    def infer(m):
        with torch.no_grad():
            m.reset()
            m(x, y)

    for name, m in [(f"flexsn ({backend})", ours), ("torch loop", ref)]:
        a, b = x.clone().requires_grad_(), y.clone().requires_grad_()
        print(f"  {name:15s} T=16 N=3x32x32: inference {timed(lambda: infer(m), device):8.3f} ms, "
              f"training step {timed(lambda: train(m, a, b), device):8.3f} ms")


if __name__ == "__main__":
    main()
