"""FlexSN's compiled backends against the "torch" reference loop: outputs,
final states, state sequences and gradients over T, shapes and dtypes."""

import contextlib
import copy

import os

import pytest
import torch

import flexsn
from conftest import LaunchSpy, assert_close
from cores import lif, tutorial

SHAPES = [(8,), (4, 8), (2, 3, 8)]


def pair(core, ni, ns, device, **kw):
    compiled = flexsn.FlexSN(core, num_inputs=ni, num_states=ns, backend=device.type,
                             store_state_seqs=True, **kw)
    reference = flexsn.FlexSN(core, num_inputs=ni, num_states=ns, backend="torch",
                              store_state_seqs=True, **kw)
    assert compiled.compiled and not reference.compiled
    return compiled, reference


@pytest.mark.parametrize("T", [0, 1, 4, 16])
@pytest.mark.parametrize("shape", SHAPES)
def test_tutorial_neuron_forward_backward(device, T, shape):
    c, r = pair(tutorial(), 2, 2, device)
    torch.manual_seed(T + len(shape))
    x = torch.randn(T, *shape, device=device) * 2
    y = torch.randn(T, *shape, device=device)
    xc, yc, xr, yr = (t.clone().requires_grad_() for t in (x, y, x, y))
    oc, orf = c(xc, yc), r(xr, yr)
    for a, b, what in zip(oc, orf, ("s1", "s2")):
        assert_close(a, b, what=what)
    for a, b, what in zip(c.state_seqs, r.state_seqs, ("v seq", "rho seq")):
        assert_close(a, b, what=what)
    for a, b, what in zip(c.states, r.states, ("v", "rho")):
        assert_close(a, b, what=what)
    if T == 0:
        assert oc[0].shape == (0, *shape)
        return
    g1, g2 = torch.randn_like(oc[0]), torch.randn_like(oc[1])
    (oc[0] * g1 + oc[1] * g2 + c.state_seqs[0].sin()).sum().backward()
    (orf[0] * g1 + orf[1] * g2 + r.state_seqs[0].sin()).sum().backward()
    assert_close(xc.grad, xr.grad, what="grad x")
    assert_close(yc.grad, yr.grad, what="grad y")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_storage(device, dtype):
    c, r = pair(lif(), 1, 1, device)
    torch.manual_seed(1)
    x = (torch.randn(16, 4, 8, device=device) * 1.5).to(dtype)
    xc, xr = x.clone().requires_grad_(), x.clone().requires_grad_()
    sc, sr = c(xc), r(xr)
    assert sc.dtype == dtype
    # Spikes flip where bf16 rounding moves h across the threshold: compare
    # the fraction that differs, and the membrane where neither spiked.
    assert (sc != sr).float().mean().item() < 0.02
    g = torch.ones_like(sc)
    sc.backward(g)
    sr.backward(g)
    same = (sc == sr).all(0)
    if same.any():
        assert_close(xc.grad[:, same].float(), xr.grad[:, same].float(), dtype=dtype,
                     what="grad x (bf16)")


def test_float64_gradcheck_cpu():
    torch.manual_seed(0)

    def smooth(x, v, w):
        h = v * torch.sigmoid(w) + torch.tanh(x)
        return h * h, h - 0.1 * h * h

    w = torch.randn(5, dtype=torch.float64, requires_grad=True)
    k = flexsn.FlexSNKernel(lambda x, v: smooth(x, v, w), 1, 1, backend="cpu")
    x = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    v0 = torch.randn(5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, v0: k(x, v0), (x, v0))
    assert torch.autograd.gradcheck(lambda w_: flexsn.FlexSNKernel(
        lambda x, v: smooth(x, v, w_), 1, 1, backend="cpu")(x.detach(), v0.detach()),
        (w,))


def test_only_some_inputs_require_grad(device):
    c, r = pair(tutorial(), 2, 2, device)
    x = torch.randn(5, 6, device=device)
    y = torch.randn(5, 6, device=device)
    xc, xr = x.clone().requires_grad_(), x.clone().requires_grad_()
    c(xc, y)[0].sum().backward()
    r(xr, y)[0].sum().backward()
    assert_close(xc.grad, xr.grad, what="grad x")


def test_initial_state_gradients(device):
    core = lif()
    k = flexsn.FlexSNKernel(core, 1, 1, backend=device.type)
    kr = flexsn.FlexSNKernel(core, 1, 1, backend="torch")
    x = torch.randn(6, 7, device=device)
    v0 = torch.randn(7, device=device)
    vc, vr = v0.clone().requires_grad_(), v0.clone().requires_grad_()
    sc, seqc = k(x, vc)
    sr, seqr = kr(x, vr)
    (sc.sum() + seqc.pow(2).sum()).backward()
    (sr.sum() + seqr.pow(2).sum()).backward()
    assert_close(vc.grad, vr.grad, what="grad v0")


@pytest.mark.parametrize("kind", ["scalar", "neuron", "channel"])
def test_parameter_gradients(device, kind):
    """Tensors the core captures are parameters: scalar, per-neuron, or
    broadcast per channel; their gradients are reduced to their shape."""
    shape = {"scalar": (1,), "neuron": (2, 3, 4), "channel": (3, 1)}[kind]
    torch.manual_seed(3)
    w = (torch.randn(*shape, device=device) * 0.5).requires_grad_()
    wr = w.detach().clone().requires_grad_()

    def make(param):
        def core(x, v):
            h = v + (x - v) * torch.sigmoid(param)
            s = flexsn.surrogate.Sigmoid()(h - 1.)
            return s, h * (1. - s)
        return core

    c = flexsn.FlexSN(make(w), num_inputs=1, num_states=1, backend=device.type)
    r = flexsn.FlexSN(make(wr), num_inputs=1, num_states=1, backend="torch")
    x = torch.randn(8, 2, 3, 4, device=device) * 2
    c(x).sum().backward()
    r(x).sum().backward()
    assert w.grad.shape == w.shape
    assert_close(w.grad, wr.grad, what=f"grad of a {kind} parameter")


def test_step_mode_single_matches_multi(device):
    core = tutorial()
    m = flexsn.FlexSN(core, num_inputs=2, num_states=2, backend=device.type)
    s = flexsn.FlexSN(core, num_inputs=2, num_states=2, step_mode="s",
                      backend=device.type)
    x, y = torch.randn(4, 3, 5, device=device), torch.randn(4, 3, 5, device=device)
    multi = m(x, y)
    for t in range(4):
        out = s(x[t], y[t])
        assert_close(out[0], multi[0][t], what=f"s1 at t={t}")
        assert_close(out[1], multi[1][t], what=f"s2 at t={t}")
    assert_close(s.states[0], m.states[0], what="v")


def test_states_carry_over_calls_and_reset(device):
    c, r = pair(lif(), 1, 1, device)
    x = torch.randn(3, 10, device=device) * 2
    for _ in range(3):
        assert_close(c(x), r(x))
    assert_close(c.states[0], r.states[0])
    c.reset()
    assert c.states is None and c.state_seqs is None
    fresh = flexsn.FlexSN(lif(), num_inputs=1, num_states=1, backend=device.type)
    assert_close(c(x), fresh(x))


def test_init_states_override(device):
    class Started(flexsn.FlexSN):
        @staticmethod
        def init_states(num_states, step_mode, *args):
            return [torch.full_like(args[0][0], 0.7) for _ in range(num_states)]

    c = Started(lif(), num_inputs=1, num_states=1, backend=device.type)
    r = Started(lif(), num_inputs=1, num_states=1, backend="torch")
    x = torch.randn(4, 6, device=device)
    assert_close(c(x), r(x))


def test_kernel_matches_module(device):
    core = tutorial()
    k = flexsn.FlexSNKernel(core, 2, 2, backend=device.type)
    kf = flexsn.FlexSNKernel(core, 2, 2, backend=device.type, final_state=True)
    m = flexsn.FlexSN(core, num_inputs=2, num_states=2, backend=device.type,
                      store_state_seqs=True)
    x, y = torch.randn(5, 9, device=device), torch.randn(5, 9, device=device)
    z = torch.zeros(9, device=device)
    s1, s2, v, rho = k(x, y, z, z)
    ms1, ms2 = m(x, y)
    assert_close(s1, ms1)
    assert_close(s2, ms2)
    assert_close(v, m.state_seqs[0])
    f1, f2, fv, frho = kf(x, y, z, z)
    assert_close(fv, v[-1])
    assert_close(frho, rho[-1])


def test_non_contiguous_and_expanded_inputs(device):
    c, r = pair(lif(), 1, 1, device)
    base = torch.randn(8, 6, 5, device=device)
    x = base.transpose(1, 2)          # non-contiguous
    assert not x.is_contiguous()
    assert_close(c(x), r(x), what="transposed input")
    c.reset()
    r.reset()
    e = torch.randn(8, 1, 5, device=device).expand(8, 6, 5)  # zero stride
    assert_close(c(e), r(e), what="expanded input")


def test_t_zero_keeps_states_and_gives_empty_outputs(device):
    c = flexsn.FlexSN(tutorial(), num_inputs=2, num_states=2, backend=device.type,
                      example_outputs=(torch.zeros(1), torch.zeros(1)),
                      store_state_seqs=True)
    x = torch.randn(0, 3, 4, device=device, requires_grad=True)
    s1, s2 = c(x, torch.randn(0, 3, 4, device=device))
    assert s1.shape == (0, 3, 4) and s2.shape == (0, 3, 4)
    assert all((s == 0).all() for s in c.states)
    (s1.sum() + s2.sum()).backward()
    assert x.grad is not None and x.grad.shape == x.shape


def test_deepcopy_and_repr(device):
    c = flexsn.FlexSN(lif(), num_inputs=1, num_states=1, backend=device.type)
    d = copy.deepcopy(c)
    x = torch.randn(4, 5, device=device)
    assert_close(c(x), d(x))
    assert "compiled=True" in repr(c)


def test_inference_under_no_grad_uses_final_state_kernel(device):
    c = flexsn.FlexSN(lif(), num_inputs=1, num_states=1, backend=device.type)
    x = torch.randn(6, 7, device=device, requires_grad=True)
    with torch.no_grad():
        s = c(x)
    assert not s.requires_grad and c.state_seqs is None


def test_default_zero_states_pass_null_state_pointers(device, monkeypatch):
    """From the default zero states, inference and training pass a null
    initial-state pointer, which every kernel reads as zeros: no zeros are
    allocated or filled per call, and the results and gradients are those
    of the torch loop."""
    spy = LaunchSpy(monkeypatch)
    c = flexsn.FlexSN(lif(), num_inputs=1, num_states=1, backend=device.type)
    r = flexsn.FlexSN(lif(), num_inputs=1, num_states=1, backend="torch")
    x = torch.randn(5, 6, device=device) * 2
    with spy, torch.no_grad():
        assert_close(c(x), r(x))
        assert_close(c(x), r(x), what="second call, from the carried states")
    state = ("init_state", 0)
    assert [(v, state in null) for v, null in spy.launches] == \
        [("final_state", True), ("final_state", False)]
    c.reset(), r.reset()
    spy.launches.clear()
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    g = torch.randn_like(x)
    with spy:
        sa, sb = c(xa), r(xb)
        assert_close(sa, sb)
        sa.backward(g)
        sb.backward(g)
    assert_close(xa.grad, xb.grad, what="x.grad from zero states")
    # The backward of this core reads no initial state (the compiler saves h
    # for it), so only the forward's pointer is null.
    assert [(v, state in null) for v, null in spy.launches] == \
        [("forward", True), ("backward", False)]


def picklable_core(x, v):
    """A module-level core (pickle stores functions by reference)."""
    h = v + (x - v) / 2.0
    s = flexsn.surrogate.Sigmoid()(h - 1.0)
    return s, h * (1.0 - s)


def test_pickle_rebuilds_lazily(device):
    import pickle
    m = flexsn.FlexSN(picklable_core, num_inputs=1, num_states=1, backend=device.type)
    x = torch.randn(4, 6, device=device)
    ref = m(x)
    m.reset()
    blob = pickle.dumps(m)
    assert b"libFlexSN" not in blob and b"func.func" not in blob
    m2 = pickle.loads(blob)
    assert m2.kernel.compiled == "rebuild"
    assert_close(m2(x), ref)
    assert m2.compiled


def test_half_bfloat16_and_state_dict(device):
    w = torch.nn.Parameter(torch.tensor([0.3], device=device))

    def core(x, v, w):
        h = v + (x - v) * torch.sigmoid(w)
        s = flexsn.surrogate.Sigmoid()(h - 1.)
        return s, h * (1. - s)

    m = flexsn.FlexSN(core, num_states=1, static_inputs=(w,))
    x = torch.randn(5, 8, device=device) * 2
    ref = m(x)
    for dtype in (torch.bfloat16, torch.float16):
        h = copy.deepcopy(m).to(dtype)
        h.reset()
        assert h.static_input_0.dtype == dtype
        out = h(x.to(dtype))
        assert out.dtype == dtype
        assert (out.float() != ref).float().mean() < 0.05
    sd = m.state_dict()
    assert list(sd) == ["static_input_0"]
    m2 = flexsn.FlexSN(core, num_states=1,
                       static_inputs=(torch.nn.Parameter(torch.tensor([-1.0], device=device)),))
    m2.load_state_dict(sd)
    assert_close(m2(x), ref)


def test_moved_mid_sequence_without_reset_is_an_error():
    m = flexsn.FlexSN(lif(), num_inputs=1, num_states=1, backend="cpu")
    m(torch.randn(3, 4))
    m.states = [s.double() for s in m.states]
    with pytest.raises(TypeError, match="state #0 has dtype torch.float64"):
        m(torch.randn(3, 4))


@pytest.mark.cuda
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_modules_on_two_gpus_in_one_process():
    """Kernels are loaded per device; a module on cuda:1 runs there, next to
    one on cuda:0, and PyTorch's current device is left alone."""
    torch.manual_seed(7)
    ref = flexsn.FlexSN(tutorial(), num_inputs=2, num_states=2, backend="torch")
    x, y = torch.randn(6, 3, 40), torch.randn(6, 3, 40)
    expect = ref(x, y)
    for _ in range(2):
        for dev in ("cuda:1", "cuda:0"):
            m = flexsn.FlexSN(tutorial(), num_inputs=2, num_states=2).to(dev)
            xd = x.to(dev).requires_grad_()
            out = m(xd, y.to(dev))
            assert out[0].device == torch.device(dev)
            assert_close(out[0].cpu(), expect[0], what=dev)
            out[0].sum().backward()
            assert xd.grad.device == torch.device(dev)
            assert torch.cuda.current_device() == 0
            torch.ones(3, device="cuda").sum().item()   # cuda:0 still healthy


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_moved_to_another_device_without_reset_is_an_error():
    m = flexsn.FlexSN(lif(), num_inputs=1, num_states=1)
    m(torch.randn(3, 4))
    m.cuda()
    with pytest.raises(ValueError, match=r"state #0 is on cpu but input #0 is on cuda:0"):
        m(torch.randn(3, 4, device="cuda"))
    m.reset()
    assert m(torch.randn(3, 4, device="cuda")).device.type == "cuda"


def test_output_depending_only_on_a_parameter(device):
    w = torch.tensor([0.3], device=device, requires_grad=True)
    k = flexsn.FlexSNKernel(lambda x, v: (torch.exp(2 * w) + 0 * v, v), 1, 1,
                            backend=device.type, strict=True)
    x = torch.randn(4, 6, device=device)
    out, _ = k(x, torch.zeros(6, device=device))
    out.sum().backward()
    expect = 2 * torch.exp(torch.tensor(0.6)) * 4 * 6
    assert abs(w.grad.item() - expect.item()) < 1e-4 * expect.item()


GLOBAL_DECAY = torch.tensor([0.4], requires_grad=True)


def global_core(x, v):
    """Reads a module-level tensor (a parameter the tracer must find)."""
    h = v + (x - v) * torch.sigmoid(GLOBAL_DECAY)
    s = flexsn.surrogate.Sigmoid()(h - 1.)
    return s, h * (1. - s)


def test_core_reading_a_global_tensor():
    from flexsn import _recorder
    assert any(t is GLOBAL_DECAY for t in _recorder._captured_tensors(global_core))
    k = flexsn.FlexSNKernel(global_core, 1, 1, backend="cpu")
    r = flexsn.FlexSNKernel(global_core, 1, 1, backend="torch")
    x = torch.randn(4, 9) * 2
    v0 = torch.zeros(9)
    k(x, v0)[0].sum().backward()
    g = GLOBAL_DECAY.grad.clone()
    GLOBAL_DECAY.grad = None
    r(x, v0)[0].sum().backward()
    assert_close(g, GLOBAL_DECAY.grad)


def test_results_without_gradient_pass_no_buffer(device, monkeypatch):
    """A result that gets no gradient (here s2 and the state sequences)
    reaches the backward kernel as a NULL pointer (read as zeros), not as a
    tensor of zeros: no [T, NCL] fill per missing gradient, same gradients
    as the torch loop."""
    spy = LaunchSpy(monkeypatch)
    m = flexsn.FlexSN(tutorial(), 2, 2, 2, backend=device.type, store_state_seqs=True)
    r = flexsn.FlexSN(tutorial(), 2, 2, 2, backend="torch", store_state_seqs=True)
    x = torch.randn(6, 40, device=device)
    y = torch.randn(6, 40, device=device)
    xa, ya = x.clone().requires_grad_(), y.clone().requires_grad_()
    xb, yb = x.clone().requires_grad_(), y.clone().requires_grad_()
    with spy:
        s1a, _ = m(xa, ya)
        s1b, _ = r(xb, yb)
        g = torch.randn_like(s1a)
        s1a.backward(g)
        s1b.backward(g)
    grads = [sorted(k for k in null if k[0].startswith("grad_"))
             for v, null in spy.launches if v == "backward"]
    assert grads == [[("grad_output", 1), ("grad_state_seq", 0), ("grad_state_seq", 1)]]
    assert_close(xa.grad, xb.grad, what="x.grad")
    assert_close(ya.grad, yb.grad, what="y.grad")


@pytest.mark.parametrize("case", ["aligned", "odd", "misaligned"])
def test_large_populations_take_each_launch_path(device, case):
    # On the GPU, NCL = 2^18 is past the one-neuron-per-thread threshold
    # (256 threads per SM), so an aligned launch takes the kernels' vector
    # entry (4 neurons per thread); NCL + 1, and views one element into
    # their storage, take the scalar entry.
    c, r = pair(tutorial(), 2, 2, device)
    T, n = 4, (1 << 18) + (case == "odd")
    torch.manual_seed(7)
    leaf = (torch.randn(2 * T * n + 1, device=device) * 2).requires_grad_()
    start = 1 if case == "misaligned" else 0
    xc = leaf[start:start + T * n].view(T, n)
    yc = leaf[start + T * n:start + 2 * T * n].view(T, n)
    assert xc.is_contiguous() and xc.storage_offset() % 4 == start
    xr, yr = (t.detach().clone().requires_grad_() for t in (xc, yc))
    oc, orf = c(xc, yc), r(xr, yr)
    for a, b, what in zip(oc, orf, ("s1", "s2")):
        assert_close(a, b, what=f"{case} {what}")
    for a, b, what in zip(c.state_seqs, r.state_seqs, ("v seq", "rho seq")):
        assert_close(a, b, what=f"{case} {what}")
    g1, g2 = torch.randn_like(oc[0]), torch.randn_like(oc[1])
    (oc[0] * g1 + oc[1] * g2).sum().backward()
    (orf[0] * g1 + orf[1] * g2).sum().backward()
    grad = leaf.grad[start:start + 2 * T * n].view(2, T, n)
    assert_close(grad[0], xr.grad, what=f"{case} grad x")
    assert_close(grad[1], yr.grad, what=f"{case} grad y")
    with torch.no_grad():
        c.reset()
        r.reset()
        for a, b in zip(c(xc, yc), r(xr, yr)):
            assert_close(a, b, what=f"{case} inference")


def test_training_preloads_the_backward_entry(device, monkeypatch):
    # On CUDA a training call asks the library to compile the backward's
    # entry in the background while the forward's compiles; the step is
    # unchanged by it. The cpu backend has nothing to preload.
    from flexsn import _capi
    calls = []
    real = _capi.kernel_preload
    monkeypatch.setattr(_capi, "kernel_preload", lambda k, n: calls.append(n) or real(k, n))
    c, r = pair(lif(), 1, 1, device)
    x = torch.randn(5, 3000, device=device, requires_grad=True)
    xr = x.detach().clone().requires_grad_()
    c(x).sum().backward()
    r(xr).sum().backward()
    assert_close(x.grad, xr.grad, what="grad x")
    assert calls == ([3000] * len(calls) if device.type == "cuda" else [])
    assert (len(calls) >= 1) == (device.type == "cuda")


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("with_seqs", [False, True])
def test_many_neurons_over_blocks_and_threads(device, threads, with_seqs):
    """NCL past several of the CPU kernels' blocks of 256 neurons, a partial
    block included, split over one or two threads: outputs, states and
    gradients equal the reference's, with the state sequences' gradients
    absent (null pointers read as zeros) or present."""
    c, r = pair(tutorial(), 2, 2, device)
    torch.manual_seed(5)
    # 6000 neurons: 24 blocks, the last of 112; on two threads two chunks
    # of 12 blocks (T x NCL is past CPUKernels::kMinChunkWork)
    T, shape = 7, (3, 2000)
    x = torch.randn(T, *shape, device=device) * 2
    y = torch.randn(T, *shape, device=device)
    xc, yc, xr, yr = (t.clone().requires_grad_() for t in (x, y, x, y))
    with num_threads(threads):
        oc = c(xc, yc)
    orf = r(xr, yr)
    for a, b, what in zip(oc, orf, ("s1", "s2")):
        assert_close(a, b, what=what)
    for a, b, what in zip(c.states, r.states, ("v", "rho")):
        assert_close(a, b, what=what)
    g = [torch.randn_like(o) for o in oc]
    gs = [torch.randn_like(s) for s in c.state_seqs] if with_seqs else []
    with num_threads(threads):
        torch.autograd.backward(list(oc) + (list(c.state_seqs) if with_seqs else []),
                                g + gs)
    torch.autograd.backward(list(orf) + (list(r.state_seqs) if with_seqs else []),
                            g + gs)
    assert_close(xc.grad, xr.grad, what="grad x")
    assert_close(yc.grad, yr.grad, what="grad y")


@contextlib.contextmanager
def num_threads(n):
    """PyTorch's CPU thread count (which CPU kernels split over) set to n
    for the block."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def test_cpu_launches_from_several_threads():
    """Four Python threads launch CPU kernels split over the kept worker
    threads at once (each call two chunks or more): every result equals
    the one-thread run's."""
    import threading
    k = flexsn.FlexSNKernel(lif(), 1, 1, backend="cpu")
    torch.manual_seed(3)
    xs = [torch.randn(16, 5000) * 2 for _ in range(4)]
    v0 = torch.zeros(5000)
    with num_threads(1):
        want = [k(x, v0) for x in xs]
    got, errors = [None] * 4, []

    def worker(i):
        try:
            for _ in range(20):
                got[i] = k(xs[i], v0)
        except Exception as e:  # reported below
            errors.append(e)

    with num_threads(4):
        pool = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
        for t in pool:
            t.start()
        for t in pool:
            t.join(120)
        assert not any(t.is_alive() for t in pool), "a launch did not finish"
    assert not errors, errors
    for (a, sa), (b, sb) in zip(got, want):
        assert torch.equal(a, b) and torch.equal(sa, sb)


def _child_run(conn, k, x, v0):
    # Two threads as inherited from the parent. Nothing here runs PyTorch's
    # parallel CPU ops (nor torch.set_num_threads, nor pickles a tensor):
    # with GNU OpenMP, which they use, those hang in a forked child of a
    # process that ran a parallel region (PyTorch's to mind, not ours).
    out, v = k(x, v0)
    conn.send((torch.get_num_threads(), out.numpy().tobytes(), v.numpy().tobytes()))


def test_cpu_launch_in_forked_child():
    """A child forked after the parent's split launches (its worker threads
    do not exist in the child) launches split kernels of its own and gets
    the parent's results."""
    import multiprocessing
    k = flexsn.FlexSNKernel(lif(), 1, 1, backend="cpu")
    torch.manual_seed(4)
    x, v0 = torch.randn(16, 5000) * 2, torch.zeros(5000)
    with num_threads(2):
        want = k(x, v0)  # starts a worker
        ctx = multiprocessing.get_context("fork")
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_child_run, args=(child, k, x, v0))
        proc.start()
    try:
        assert parent.poll(120), "the forked child's launch did not finish"
        threads, out, v = parent.recv()
    finally:
        proc.join(30)
        if proc.is_alive():
            proc.kill()
    assert proc.exitcode == 0 and threads == 2
    assert out == want[0].numpy().tobytes() and v == want[1].numpy().tobytes()


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux /proc")
def test_programs_share_one_compile_thread_pool():
    """Every program compiles on one process-wide pool of worker threads:
    making programs does not leave threads behind per program (each MLIR
    context used to start and keep a pool of its own)."""
    x = torch.randn(3, 64)
    before = _threads()
    for i in range(12):  # twelve programs: a threshold each
        m = flexsn.FlexSN(lif(v_th=1.0 + (i + 1) / 1024), 1, 1, backend="cpu")
        with torch.no_grad():
            m(x)
        m(x.clone().requires_grad_()).sum().backward()
    grown = _threads() - before
    assert grown <= (os.cpu_count() or 1) + 1, f"{grown} threads more after 24 programs"


def _child_compile(conn, x):
    # A program no process has compiled yet, made in the child: its passes
    # run on the child's own pool (the parent's threads are not here).
    k = flexsn.FlexSNKernel(lif(v_th=1.4375), 1, 1, backend="cpu")
    out, v = k(x, torch.zeros(x.shape[1:]))
    conn.send((out.numpy().tobytes(), v.numpy().tobytes()))


def test_new_program_in_forked_child():
    """A child forked after the parent compiled (and so started the shared
    compile pool) compiles a program of its own and gets the results the
    same program gives in the parent."""
    import multiprocessing
    torch.manual_seed(5)
    x = torch.randn(6, 300) * 2
    flexsn.FlexSNKernel(lif(v_th=1.3125), 1, 1, backend="cpu")(x, torch.zeros(300))
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_child_compile, args=(child, x))
    proc.start()
    try:
        assert parent.poll(120), "the forked child's compile did not finish"
        out, v = parent.recv()
    finally:
        proc.join(30)
        if proc.is_alive():
            proc.kill()
    assert proc.exitcode == 0
    want = flexsn.FlexSNKernel(lif(v_th=1.4375), 1, 1, backend="cpu")(x, torch.zeros(300))
    assert out == want[0].numpy().tobytes() and v == want[1].numpy().tobytes()


def test_bounded_reciprocal_is_ieee_division(device):
    """A divisor the GPU lowering proves to be a normal float (here a clamp
    to [1, 2]) takes the reciprocal's fast path without its range test
    (flexsn-bounded-reciprocal). That is still IEEE division, bit for bit:
    over every float in [1, 2), the clamped ends, infinities and NaN."""
    def core(x, v):
        return 1.0 / torch.clamp(x, 1.0, 2.0), v

    k = flexsn.FlexSNKernel(core, 1, 1, backend=device.type)
    every = torch.arange(0x3F800000, 0x40000000, dtype=torch.int32).view(torch.float32)
    inf, nan = float("inf"), float("nan")
    ends = torch.tensor([0.0, -0.0, 0.5, 1.0, 2.0, 3.0, 1e30, -1e30, inf, -inf, nan,
                         1.5e-45, -7.0, 1.9999999, 1.0000001, 1.25])
    x = torch.cat([every, ends]).reshape(8, -1).to(device)
    got, _ = k(x, torch.zeros(x.shape[1], device=device))
    want = 1.0 / torch.clamp(x, 1.0, 2.0)
    assert torch.equal(got.isnan(), want.isnan())
    finite = ~want.isnan()
    assert torch.equal(got[finite].view(torch.int32), want[finite].view(torch.int32))
