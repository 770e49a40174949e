"""flexsn.chunked_time: a call's T steps as chunks side by side. Settled
(each chunk from the state the chunk before ends with): outputs, state
sequences and final states are the sequential scan's bit for bit, where
the chunks settle and where they do not (the sequential scan runs
instead). From affine carries (the compiler's transfer kernel, a carry
scan, the core's kernel): the sequential scan's to rounding, in three
launches."""

import pytest
import torch
from torch import nn

import flexsn
from flexsn import surrogate


def _lif(x, v, tau, v_th):  # a reset, a threshold per neuron
    h = v + (x - v) / tau
    s = surrogate.ATan()(h - v_th)
    return s, h * (1 - s)


def _li(x, v, tau, v_th):   # affine: a leak, no reset
    h = v + (x - v) / tau
    return h - v_th, h


def _integrator(x, v, tau, v_th):  # never forgets where it started
    h = v + x
    return h, h


def _neuron(core, device, seqs=False, dtype=torch.float32):
    tau = torch.tensor([2.0], device=device, dtype=dtype)
    v_th = torch.linspace(0.5, 1.5, 24, device=device, dtype=dtype).view(4, 6)
    return flexsn.FlexSN(core, num_states=1, static_inputs=(tau, v_th), store_state_seqs=seqs)


def _call_from(m, x, v0, seqs):
    """A call of `m` on `x` from the state `v0`: [output, final state] (and
    the state sequence where the module stores it)."""
    def run():
        m.reset()
        m.states = [v0.clone()]
        out = m(x)
        return [out, m.states[0]] + (list(m.state_seqs) if seqs else [])
    return run


def _bits(t):
    return t.view(torch.int32)


@pytest.mark.parametrize("core", [_lif, _li, _integrator], ids=["lif", "li", "integrator"])
@pytest.mark.parametrize("seqs", [False, True], ids=["outputs", "state-seqs"])
def test_chunks_give_the_sequential_scan_bit_for_bit(device, core, seqs):
    torch.manual_seed(0)
    m = _neuron(core, device, seqs)
    x = torch.rand(256, 4, 6, device=device) * 2
    v0 = torch.rand(4, 6, device=device)
    run = _call_from(m, x, v0, seqs)
    with torch.no_grad():
        want = run()
        assert not torch.equal(want[1], v0)
        for chunks in (2, 4, 8):  # 32 steps or more: a leak of 1/2 a step forgets 2^-32
            with flexsn.chunked_time(chunks, scheme="settle") as calls:
                got = run()
            assert calls.calls == 1
            if core is _integrator:  # one chunk more settles a round: `chunks` rounds
                assert calls.launches == min(chunks, 4)
                assert calls.sequential == (chunks > 4)
            else:  # a leak or a reset forgets the guess within a chunk
                assert calls.sequential == 0 and calls.launches <= 3, calls
            assert len(got) == len(want)
            for a, b in zip(got, want):
                assert torch.equal(_bits(a), _bits(b)), (core.__name__, chunks)


@pytest.mark.cuda
def test_chunks_of_neurons_that_are_not_whole_vector_lanes():
    """NCL not a multiple of 8: on a GPU the chunks are transposed into
    rows (the kernels read them in place otherwise); bit for bit either
    way, inference and training. (On the CPU such an NCL meets glibc's
    scalar remainder: see chunked_time's docstring.)"""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    device = "cuda"
    torch.manual_seed(0)
    lif = flexsn.neuron.LIFNode(tau=2.0, step_mode="m").to(device)
    x = torch.rand(512, 3, 5, device=device) * 2

    def call():
        lif.reset()
        xg = x.clone().requires_grad_()
        out = lif(xg)
        out.sum().backward()
        return [out.detach(), lif.v.detach(), xg.grad]
    want = call()
    with flexsn.chunked_time(8, scheme="settle") as calls:
        got = call()
    assert calls.calls == 1 and calls.sequential == 0, calls
    for a, b in zip(got, want):
        assert torch.equal(_bits(a), _bits(b))


def test_a_call_the_chunks_do_not_divide_runs_as_before(device):
    m = _neuron(_lif, device)
    x = torch.rand(30, 4, 6, device=device) * 2
    with torch.no_grad():
        m.reset()
        want = m(x)
        m.reset()
        with flexsn.chunked_time(4, scheme="settle"):  # 30 steps: not 4 chunks
            assert torch.equal(m(x), want)


def _training(m, x, v0, seqs):
    """A training call's outputs, final state and the gradients of x, the
    initial state and the two parameters (tau a scalar, v_th per neuron)."""
    m.reset()
    m.states = [v0]
    out = m(x)
    w = torch.linspace(0.5, 1.5, out.numel(), dtype=x.dtype, device=x.device).view(out.shape)
    loss = (out * w).sum() + (m.states[0] ** 2).sum()
    if seqs:
        loss = loss + (m.state_seqs[0] * 0.3).sum()
    grads = torch.autograd.grad(loss, [x, v0, *m.static_inputs])
    return [out.detach(), m.states[0].detach(), *grads]


def _trainable(core, device, dtype, seqs):
    m = _neuron(core, device, seqs).to(dtype)
    for p in m.static_inputs:
        p.requires_grad_()
    x = (torch.rand(256, 4, 6, device=device, dtype=dtype) * 2).requires_grad_()
    v0 = torch.rand(4, 6, device=device, dtype=dtype, requires_grad=True)
    return m, x, v0


@pytest.mark.parametrize("core", [_lif, _li], ids=["lif", "li"])
@pytest.mark.parametrize("seqs", [False, True], ids=["outputs", "state-seqs"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_training_chunks_give_the_sequential_numbers(device, core, seqs, dtype):
    """Forward and backward both settle as chunks: outputs, states and the
    gradients of the inputs and the initial state are the sequential
    scan's; the parameters' sum their steps in another order."""
    torch.manual_seed(0)
    m, x, v0 = _trainable(core, device, dtype, seqs)
    want = _training(m, x, v0, seqs)
    for chunks in (2, 8):
        with flexsn.chunked_time(chunks, scheme="settle") as calls:
            got = _training(m, x, v0, seqs)
        assert calls.sequential == 0 and 4 <= calls.launches <= 8, calls
        for a, b in zip(got[:4], want[:4]):
            assert torch.equal(a, b), (chunks, calls)
        tol = dict(rtol=1e-5, atol=1e-4) if dtype == torch.float32 else \
            dict(rtol=1e-12, atol=1e-11)
        for a, b in zip(got[4:], want[4:]):
            torch.testing.assert_close(a, b, **tol)


def test_training_from_zero_states_with_only_the_input_learning(device):
    """No initial state and nothing but the input requiring grad: the
    chunks' backward still carries the adjoint across chunk borders."""
    torch.manual_seed(0)
    lif = flexsn.neuron.LIFNode(tau=2.0, step_mode="m").to(device)
    x = (torch.rand(512, 64, device=device) * 2).requires_grad_()

    def step():
        lif.reset()
        out = lif(x)
        g, = torch.autograd.grad(out.sum(), x)
        return [out.detach(), lif.v.detach(), g]
    want = step()
    with flexsn.chunked_time(16, scheme="settle") as calls:
        got = step()
    assert calls.sequential == 0 and calls.launches >= 4, calls
    for a, b in zip(got, want):
        assert torch.equal(_bits(a), _bits(b))


@pytest.mark.parametrize("seqs", [False, True], ids=["outputs", "state-seqs"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_a_reset_core_settles_forward_and_composes_adjoint_carries_backward(device, seqs,
                                                                           dtype):
    """scheme="auto" on LIF: the forward settles (the sequential scan's
    bits), the backward is three launches (the compiler's backward
    transfer kernel, the carry kernel, the backward from each chunk's end
    adjoint) with no host sync: every gradient the sequential scan's to
    rounding, also where the settling backward would not settle in
    `rounds` and would rerun the sequential scan."""
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else \
        dict(rtol=1e-12, atol=1e-12)
    torch.manual_seed(0)
    cases = [(_trainable(_lif, device, dtype, seqs), 4), (_trainable(_lif, device, dtype, seqs), 8)]
    if dtype == torch.float64 and not seqs:
        cases.append((_slow_adjoint(device), 8))
    for (m, x, v0), chunks in cases:
        want = _training(m, x, v0, seqs)
        forward = _forward_of(m, x, v0, chunks, 4, "auto")
        with flexsn.chunked_time(chunks) as calls:
            got = _training(m, x, v0, seqs)
        assert forward.sequential == 0 and calls.affine == 0 and calls.sequential == 0, calls
        assert calls.launches == forward.launches + 3, (calls, forward)
        for a, b in zip(got[:2], want[:2]):
            assert torch.equal(a, b)
        for a, b in zip(got[2:], want[2:]):
            torch.testing.assert_close(a, b, **tol)


def test_adjoint_carries_read_a_gradient_not_given_as_zeros(device):
    """A loss of the first output only, from a module that stores its
    state sequences: the backward transfer kernel reads the missing
    gradients (of the second output, of the state sequences) as zeros."""
    from cores import tutorial
    torch.manual_seed(0)
    m = flexsn.FlexSN(tutorial(), num_inputs=2, num_states=2, num_outputs=2,
                      store_state_seqs=True).to(device)
    xs = [(torch.rand(512, 3, 8, device=device) * 2).requires_grad_() for _ in range(2)]

    def step():
        m.reset()
        out, _ = m(*xs)
        return [out.detach(), *torch.autograd.grad((out * out).sum(), xs)]
    want = step()
    with flexsn.chunked_time(4) as calls:
        got = step()
    assert calls.launches >= 4 and calls.sequential == 0, calls
    assert torch.equal(got[0], want[0])
    for a, b in zip(got[1:], want[1:]):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("scheme", ["settle", "affine"])
def test_a_training_call_holds_nothing_after_its_backward(device, scheme):
    """Nothing of a chunked training call outlives its graph without the
    garbage collector: its autograd node keeps what the backward reads as
    saved tensors, not in a cycle with its outputs (which held every
    call's results until a collection, and made each call allocate anew)."""
    import gc
    import weakref
    m, x, v0 = _trainable(_li, device, torch.float32, True)
    gc.collect()
    gc.disable()
    try:
        with flexsn.chunked_time(8, scheme=scheme):
            m.reset()
            m.states = [v0]
            out = m(x)
        node, seen = out.grad_fn, set()
        while type(node).__name__ != "_ChunkedTrainingBackward":
            seen.add(node)
            node = next(n for n, _ in node.next_functions if n is not None and n not in seen)
        run = weakref.ref(node.run)
        seq = weakref.ref(m.state_seqs[0])
        del node, seen
        (out.sum() + m.state_seqs[0].sum()).backward()
        assert x.grad is not None and run() is not None
        del out
        m.reset()
        assert run() is None and seq() is None
    finally:
        gc.enable()


def _slow_adjoint(device):
    """LIF with tau = 100 and inputs that make it spike every few steps:
    each spike resets the membrane, so the forward forgets where a chunk
    started within a chunk of 32 steps, while the adjoint, carried through
    the surrogate gradient at every reset and decaying by 0.99 a step,
    does not (float64)."""
    m, x, v0 = _trainable(_lif, device, torch.float64, False)
    with torch.no_grad():
        m.static_inputs[0].fill_(100.0)
        x.mul_(50.0)
    return m, x, v0


def _forward_of(m, x, v0, chunks, rounds, scheme="settle"):
    """How a no-grad call of `m` from `v0` ran as chunks."""
    with flexsn.chunked_time(chunks, rounds=rounds, scheme=scheme) as calls:
        m.reset()
        m.states = [v0]
        with torch.no_grad():
            m(x)
    return calls


def test_a_backward_that_does_not_settle_runs_the_sequential_one(device):
    """scheme="settle": the forward settles as chunks, the backward does
    not in `rounds` launches and runs the sequential forward and
    backward: every gradient the sequential scan's bit for bit."""
    torch.manual_seed(0)
    m, x, v0 = _slow_adjoint(device)
    want = _training(m, x, v0, False)
    forward = _forward_of(m, x, v0, 8, 4)
    assert forward.sequential == 0, forward
    with flexsn.chunked_time(8, rounds=4, scheme="settle") as calls:
        got = _training(m, x, v0, False)
    assert calls.launches == forward.launches and calls.sequential == 1, calls
    for a, b in zip(got, want):
        assert torch.equal(a, b)


def test_recomputing_calls_run_as_before():
    m, x, v0 = _trainable(_lif, "cpu", torch.float32, False)
    want = _training(m, x, v0, False)
    with flexsn.chunked_time(4, scheme="settle") as calls, flexsn.recompute_states():
        got = _training(m, x, v0, False)
    assert calls.calls == 0
    for a, b in zip(got, want):
        assert torch.equal(a, b)


def test_a_plan_made_outside_is_not_taken_inside():
    """A repeated call's fast path is the sequential scan's: the chunks'
    calls take their own path (the same numbers either way)."""
    m = _neuron(_li, "cpu")
    x = torch.rand(16, 4, 6)
    with torch.no_grad():
        for _ in range(2):  # the second call runs the plan the first kept
            m.reset()
            want = m(x)
        with flexsn.chunked_time(4, scheme="settle"):
            for _ in range(2):
                m.reset()
                assert torch.equal(m(x), want)


@pytest.mark.parametrize("chunks, rounds, what", [
    (1, 4, "chunks must be 'auto' or an int >= 2"), (2.0, 4, "chunks must be 'auto' or an int"),
    (True, 4, "chunks must be 'auto' or an int"), ("all", 4, "chunks must be 'auto' or an int"),
    (4, 0, "rounds must be an int >= 1")])
def test_bad_arguments_name_the_problem(chunks, rounds, what):
    with pytest.raises(ValueError, match=what):
        with flexsn.chunked_time(chunks, rounds):
            pass


def test_layers_of_a_network_chunk_too():
    """flexsn.multistep runs each neuron as one scan: inside, each chunks."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 8), flexsn.neuron.LIFNode(step_mode="m"),
                        nn.Linear(8, 3), flexsn.neuron.LIFNode(step_mode="m"))
    x = torch.rand(48, 2, 6) * 3
    with torch.no_grad():
        for m in net:
            getattr(m, "reset", lambda: None)()
        want = net(x)
        for m in net:
            getattr(m, "reset", lambda: None)()
        with flexsn.chunked_time(6, scheme="settle"):
            got = net(x)
    assert torch.equal(got, want)


@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
def test_two_inputs_two_states_two_outputs(device, training):
    """SpikingJelly's tutorial neuron: every input, state and output
    carried through the chunks (its second state leaks by 0.9 a step, so
    chunks of 256 steps). Its sigmoid is an exp: on the CPU the steps
    are 4 x 8 neurons, which the vectorized loop computes whole (glibc's
    vector exp, where a scalar remainder would call libm's)."""
    from cores import tutorial
    torch.manual_seed(0)
    m = flexsn.FlexSN(tutorial(), num_inputs=2, num_states=2, num_outputs=2,
                      store_state_seqs=True)
    x = (torch.randn(1024, 4, 8, device=device) * 2).requires_grad_(training)
    y = torch.randn(1024, 4, 8, device=device).requires_grad_(training)
    v0 = [torch.rand(4, 8, device=device).requires_grad_(training) for _ in range(2)]

    def call():
        m.reset()
        m.states = list(v0)
        with torch.set_grad_enabled(training):
            s1, s2 = m(x, y)
            got = [s1, s2, *m.states, *m.state_seqs]
            if not training:
                return got
            loss = sum((t * (k + 1)).sum() for k, t in enumerate(got))
            return [t.detach() for t in got] + list(torch.autograd.grad(loss, [x, y, *v0]))
    want = call()
    with flexsn.chunked_time(4, scheme="settle") as calls:
        got = call()
    assert calls.sequential == 0 and calls.launches >= (4 if training else 2), calls
    for a, b in zip(got, want):
        assert torch.equal(_bits(a), _bits(b))


def _random_core(rng, num_states, affine=False):
    """A random elementwise step over (x, states...): each new state a
    leak of the old plus a bounded mix of values, one output. `affine`:
    state-dependent values meet only sums, products with state-free values
    and choices on the input (functions of the input alone are free), and
    the mix is linear: the compiler proves every state affine."""
    kinds = ["add", "mul", "tanh", "where", "spike"] if affine else \
        ["add", "mul", "tanh", "sigmoid", "where", "spike"]
    ops, dep, n = [], [False] + [True] * num_states, 1 + num_states
    bound = 1.0 if affine else 1.5
    for _ in range(int(rng.integers(3, 8) if affine else rng.integers(2, 7))):
        kind = str(rng.choice(kinds))
        i, j = int(rng.integers(0, n)), int(rng.integers(0, n))
        c = float(rng.uniform(-bound, bound))
        if affine and (kind == "mul" and dep[i] and dep[j] or
                       kind in ("tanh", "spike") and dep[i]):
            kind = "add"
        ops.append((kind, i, j, c))
        dep.append(dep[i] or (dep[j] and kind in ("add", "mul", "where")))
        n += 1
    leaks = [float(rng.uniform(0.3, 0.8)) for _ in range(num_states)]
    mixes = [int(rng.integers(1, n)) for _ in range(num_states)]
    out = int(rng.integers(1, n))

    def core(x, *states):
        v = [x, *states]
        for kind, i, j, c in ops:
            a, b = v[i], v[j]
            v.append({"add": lambda: a + b * c, "mul": lambda: a * b,
                      "tanh": lambda: torch.tanh(a), "sigmoid": lambda: torch.sigmoid(a),
                      "where": lambda: torch.where((x if affine else a) > c, b, a),
                      "spike": lambda: surrogate.ATan()(a - c)}[kind]())
        new = [leak * s + (0.1 * v[m] if affine else torch.tanh(v[m]))
               for leak, s, m in zip(leaks, states, mixes)]
        return (v[out] + 0 * x, *new)
    return core


def _random_call(core, num_states, x, training):
    """A call of a one-input, one-output f64 module of `core` on `x` from
    random initial states: [output, final states] (and, training, the
    gradients of x and the initial states of a weighted sum of them)."""
    m = flexsn.FlexSN(core, num_inputs=1, num_states=num_states, num_outputs=1,
                      example_inputs=[torch.zeros(4, 8, dtype=torch.float64)] * (1 + num_states))
    x = x.requires_grad_(training)
    v0 = [torch.rand(4, 8, device=x.device, dtype=torch.float64).requires_grad_(training)
          for _ in range(num_states)]

    def call():
        m.reset()
        m.states = list(v0)
        with torch.set_grad_enabled(training):
            got = [m(x), *m.states]
            if training:
                loss = sum((t * (k + 1)).sum() for k, t in enumerate(got))
                got = [t.detach() for t in got] + list(torch.autograd.grad(loss, [x, *v0]))
        return got
    return call


@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
def test_random_cores_give_the_sequential_numbers(device, training):
    """Random one- and two-state cores in f64, each leaking (so chunks of
    128 steps settle): outputs, final states and the gradients of the
    input and the initial states bit for bit."""
    import numpy as np
    rng = np.random.default_rng(3)
    for case in range(8):
        num_states = 1 + case % 2
        torch.manual_seed(case)
        x = torch.randn(512, 4, 8, device=device, dtype=torch.float64) * 2
        call = _random_call(_random_core(rng, num_states), num_states, x, training)
        want = call()
        with flexsn.chunked_time(4, scheme="settle") as calls:
            got = call()
        assert calls.sequential == 0, (case, calls)
        for a, b in zip(got, want):
            assert torch.equal(a.view(torch.int64), b.view(torch.int64)), case


@pytest.mark.parametrize("scheme", ["auto", "settle"])
def test_random_half_precision_cores_train_as_the_sequential_scan(device, scheme):
    """Random one- and two-state cores in bf16 and f16, from given initial
    states: outputs and final states bit for bit, the gradients of the
    input and the initial states the sequential scan's to the rounding of
    composed adjoints (bit for bit where the backward settles)."""
    import numpy as np
    rng = np.random.default_rng(3)
    for case in range(6):
        num_states = 1 + case % 2
        dtype = torch.float16 if case % 3 == 0 else torch.bfloat16
        torch.manual_seed(case)
        m = flexsn.FlexSN(_random_core(rng, num_states), num_inputs=1, num_states=num_states,
                          num_outputs=1, example_inputs=[torch.zeros(4, 8)] * (1 + num_states))
        x = (torch.randn(512, 4, 8, device=device) * 2).to(dtype).requires_grad_()
        v0 = [torch.rand(4, 8, device=device).to(dtype).requires_grad_()
              for _ in range(num_states)]

        def call():
            m.reset()
            m.states = list(v0)
            got = [m(x), *m.states]
            loss = sum((t.float() * (k + 1)).sum() for k, t in enumerate(got))
            return [t.detach() for t in got] + list(torch.autograd.grad(loss, [x, *v0]))
        want = call()
        with flexsn.chunked_time(4, rounds=8, scheme=scheme) as calls:
            got = call()
        assert calls.calls == 1 and calls.sequential == 0, (case, calls)
        for a, b in zip(got[:1 + num_states], want[:1 + num_states]):
            assert torch.equal(a.view(torch.int16), b.view(torch.int16)), case
        for a, b in zip(got[1 + num_states:], want[1 + num_states:]):
            if scheme == "settle":
                assert torch.equal(a.view(torch.int16), b.view(torch.int16)), case
            else:
                assert _close(a, b, dtype), case


@pytest.mark.cuda
@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
def test_random_cores_settle_on_the_device(training):
    """scheme="auto" on a GPU, chunks read in place: random cores with
    resets settle without the host (a guess launch, the kernel, its
    repair kernel): outputs and final states bit for bit, the gradients
    (composed adjoints) to rounding."""
    import numpy as np
    _cuda()
    rng = np.random.default_rng(3)
    for case in range(8):
        num_states = 1 + case % 2
        torch.manual_seed(case)
        x = torch.randn(512, 4, 8, device="cuda", dtype=torch.float64) * 2
        call = _random_call(_random_core(rng, num_states), num_states, x, training)
        want = call()
        for rounds in (1, 2):
            with flexsn.chunked_time(8, rounds=rounds) as calls:
                got = call()
            if calls.affine:
                break  # an affine core: its chunks compose (tested above)
            assert calls.sequential == 0 and calls.repaired == 1, (case, calls)
            assert calls.launches == rounds + 1 + 3 * training, (case, calls)
            for a, b in zip(got[:1 + num_states], want):
                assert torch.equal(a.view(torch.int64), b.view(torch.int64)), (case, rounds)
            for a, b in zip(got[1 + num_states:], want[1 + num_states:]):
                torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


def test_the_guess_kernel_writes_the_final_states_alone(device):
    """A reset core's chunks settled on the device start from the chunk
    ends of a final-state kernel of the core with its outputs dropped:
    it writes no output sequence, and its final states are the call's."""
    from flexsn._compiled import inference_config
    torch.manual_seed(0)
    m = _neuron(_lif, device)
    x = torch.rand(64, 4, 6, device=device) * 2
    v0 = torch.rand(4, 6, device=device)
    want = _call_from(m, x, v0, False)()
    tau, v_th = m.static_inputs
    guess = inference_config(m.kernel.compiled, torch.float32, x.device, False,
                             [torch.float32] * 2, [True, False], states_only=True)
    assert guess.kernel.result_keys == [("final_state", 0)]
    outs, finals = guess([x, v0, tau, v_th])
    assert outs == [] and torch.equal(finals[0], want[1])


def _cuda():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")


def _never_fires(x, v, tau, v_th):  # a reset that never comes: never forgets its start
    h = v + x
    s = surrogate.ATan()(h - 1e30)
    return s, h * (1 - s)


@pytest.mark.cuda
@pytest.mark.parametrize("core", [_lif, _never_fires], ids=["lif", "never-fires"])
@pytest.mark.parametrize("seqs", [False, True], ids=["outputs", "state-seqs"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_the_repair_kernel_gives_the_sequential_scan_bit_for_bit(core, seqs, dtype):
    """The chunk repair kernel reruns each chunk whose start was not what
    the chunk before ends with. From the call's initial state (rounds=1)
    nearly every chunk of LIF reruns, and every chunk of a neuron that
    never forgets (the sequential scan, in effect); from a guess launch's
    ends (rounds=2) few do: bit for bit each way, state sequences and
    bf16 storage (f32 chunk borders) included."""
    _cuda()
    torch.manual_seed(0)
    m = _neuron(core, "cuda", seqs).to(dtype)
    x = (torch.rand(512, 4, 6, device="cuda") * 2).to(dtype)
    v0 = torch.rand(4, 6, device="cuda").to(dtype)
    run = _call_from(m, x, v0, seqs)
    with torch.no_grad():
        want = run()
        for chunks in (2, 8, 64):
            for rounds in (1, 2):
                with flexsn.chunked_time(chunks, rounds=rounds) as calls:
                    got = run()
                assert (calls.calls, calls.sequential, calls.affine, calls.repaired) == \
                    (1, 0, 0, 1), calls
                assert calls.launches == rounds + 1, calls
                for a, b in zip(got, want):
                    assert torch.equal(a.view(torch.int16 if dtype == torch.bfloat16
                                              else torch.int32),
                                       b.view(torch.int16 if dtype == torch.bfloat16
                                              else torch.int32)), (chunks, rounds)


def _captured(step, leaf):
    """`step(leaf)` inside chunked_time(16), warmed up on a side stream and
    captured there into a CUDA graph: (the graph, what the captured call
    returned, the ChunkedCalls of both calls)."""
    with flexsn.chunked_time(16) as calls:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            step(leaf)  # compiles and warms up on the capturing stream
            graph = torch.cuda.CUDAGraph()
            leaf.grad = None
            with torch.cuda.graph(graph):
                got = step(leaf)
        torch.cuda.current_stream().wait_stream(s)
    return graph, got, calls


@pytest.mark.cuda
@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
def test_a_reset_core_replays_from_a_cuda_graph(training):
    """LIF's chunks settled on the device inside a CUDA graph capture,
    replayed on new inputs: outputs and final states the eager sequential
    scan's bit for bit, the gradient to rounding."""
    _cuda()
    torch.manual_seed(0)
    lif = flexsn.neuron.LIFNode(tau=2.0, step_mode="m").to("cuda")
    x = torch.rand(1024, 64, device="cuda") * 2
    static = x.clone().requires_grad_(training)

    def step(xg):
        lif.reset()
        with torch.set_grad_enabled(training):
            out = lif(xg)
            if training:
                out.sum().backward()
        return out.detach(), lif.v.detach()
    graph, (out, v), calls = _captured(step, static)
    assert calls.calls == calls.repaired == 2 and calls.sequential == 0, calls
    for trial in range(2):
        new = torch.rand(1024, 64, device="cuda") * (2 + trial)
        with torch.no_grad():
            static.copy_(new)
        if training:
            static.grad.zero_()
        graph.replay()
        torch.cuda.synchronize()
        want_x = new.clone().requires_grad_(training)
        want = step(want_x)
        assert torch.equal(out, want[0]) and torch.equal(v, want[1]), trial
        if training:
            torch.testing.assert_close(static.grad, want_x.grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "f16"])
@pytest.mark.parametrize("scheme", ["auto", "settle"])
def test_half_precision_chunks_give_the_sequential_numbers(device, dtype, scheme):
    """A half-precision scan carries its states in float32 between steps:
    its chunks start and end in float32 too, bit for bit (64 chunks of 64
    steps: chunk borders rounded to half precision flipped spikes). In
    training the chunks' kernels save what the sequential scan's save
    (flexsn.state_storage) and the backward reads the states rounded as the
    sequential one stores them: the gradient is the sequential scan's to
    the rounding of the composed adjoints (without both, LIF's f16
    gradient differed from it in 829 of 6144 elements, by up to 0.117)."""
    torch.manual_seed(0)
    lif = flexsn.neuron.LIFNode(tau=2.0, step_mode="m").to(device)
    x = (torch.rand(4096, 256, device=device) * 2).to(dtype)
    g = torch.randn(4096, 256, device=device).to(dtype)
    for training in (False, True):
        xg = x.clone().requires_grad_(training)

        def call():
            lif.reset()
            with torch.set_grad_enabled(training):
                out = lif(xg)
                got = [out.detach(), lif.v.detach()]
                if training:
                    got += list(torch.autograd.grad(out, xg, g))
            return got
        want = call()
        with flexsn.chunked_time(64, rounds=8, scheme=scheme) as calls:
            got = call()
        assert calls.calls == 1 and calls.sequential == 0, calls
        for a, b in zip(got[:2], want[:2]):
            assert torch.equal(a.view(torch.int16), b.view(torch.int16))
        if training:
            # a few ulps of the largest gradient, in a handful of elements
            assert _close(got[2], want[2], dtype)
            assert (got[2] != want[2]).float().mean().item() < 1e-3


def _close(a, b, dtype):
    """Agreement to the rounding of a reassociated carry: a few ulps of the
    largest magnitude."""
    eps = torch.finfo(dtype).eps * 64
    scale = max(b.abs().max().item(), 1.0)
    return (a.double() - b.double()).abs().max().item() <= eps * scale


@pytest.mark.parametrize("core", [_li, _integrator], ids=["li", "integrator"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16],
                         ids=["f32", "f64", "bf16"])
@pytest.mark.parametrize("seqs", [False, True], ids=["outputs", "state-seqs"])
def test_affine_chunks_give_the_sequential_scan_to_rounding(device, core, dtype, seqs):
    """An affine core runs from composed carries in three launches, for any
    chunk count, a pure integrator (which never settles) included."""
    torch.manual_seed(0)
    m = _neuron(core, device, seqs, dtype)
    x = (torch.rand(256, 4, 6, device=device) * 2).to(dtype)
    v0 = torch.rand(4, 6, device=device).to(dtype)
    run = _call_from(m, x, v0, seqs)
    with torch.no_grad():
        want = run()
        for chunks in (2, 8, 128):
            with flexsn.chunked_time(chunks) as calls:
                got = run()
            assert (calls.calls, calls.affine, calls.launches) == (1, 1, 3), calls
            for a, b in zip(got, want):
                assert a.dtype == b.dtype and a.shape == b.shape
                assert _close(a, b, dtype), (core.__name__, chunks)


def test_auto_settles_a_core_with_a_reset_and_affine_is_refused_for_it(device):
    m = _neuron(_lif, device)
    x = torch.rand(64, 4, 6, device=device) * 2
    with torch.no_grad():
        with flexsn.chunked_time(4) as calls:
            m(x)
        assert (calls.calls, calls.affine) == (1, 0)
        m.reset()
        with pytest.raises(flexsn.FlexSNError,
                           match=r"scheme='affine'\) needs a core whose states all update "
                                 r"affinely: the core's state #0 is not affine in the states "
                                 r"\('flexsn.spike' of a value that depends on the states\)"):
            with flexsn.chunked_time(4, scheme="affine"):
                m(x)


def test_an_unknown_scheme_is_refused():
    with pytest.raises(ValueError, match="scheme must be 'auto', 'affine' or 'settle'"):
        with flexsn.chunked_time(4, scheme="parallel"):
            pass


def _cuba(x, i, v, a, b):  # a synaptic current into a leaky membrane: 2 affine states
    i2 = a * i + x
    v2 = b * v + i2
    return v2 - 1.0, i2, v2


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_affine_training_gives_the_sequential_gradients_to_rounding(device, dtype):
    """Two states that read each other, per-neuron and shared decays: the
    outputs, final states and the gradients of the input, initial states
    and decays, to rounding; the backward settles on the forward's
    values."""
    torch.manual_seed(1)
    a = torch.tensor([0.6], device=device, dtype=dtype, requires_grad=True)
    b = (torch.rand(8, device=device, dtype=dtype) * 0.5 + 0.4).requires_grad_()
    m = flexsn.FlexSN(_cuba, num_states=2, static_inputs=(a, b))
    x = torch.randn(512, 8, device=device, dtype=dtype, requires_grad=True)
    s0 = [torch.rand(8, device=device, dtype=dtype, requires_grad=True) for _ in range(2)]

    def call():
        m.reset()
        m.states = list(s0)
        out = m(x)
        got = [out, *m.states]
        loss = sum((t * (k + 1)).sum() for k, t in enumerate(got))
        return [t.detach() for t in got] + list(torch.autograd.grad(loss, [x, *s0, a, b]))
    want = call()
    with flexsn.chunked_time(16) as calls:
        got = call()
    assert (calls.calls, calls.affine, calls.sequential) == (1, 1, 0), calls
    for k, (g, w) in enumerate(zip(got, want)):
        assert _close(g, w, dtype), k


def test_affine_inference_replays_from_a_cuda_graph():
    """Three launches and no host sync: a CUDA graph holds an affine call,
    and one that settles on the device (a reset: its repair kernel). One
    that settles on the host (scheme="settle") runs sequentially under
    capture."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    torch.manual_seed(0)
    for core, scheme in ((_li, "auto"), (_lif, "auto"), (_lif, "settle")):
        m = _neuron(core, "cuda")
        x = torch.rand(1024, 4, 6, device="cuda") * 2
        with torch.no_grad():
            want = m(x)
            with flexsn.chunked_time(16, scheme=scheme) as calls:
                m.reset()
                m(x)  # compiles and warms up outside the capture
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    graph = torch.cuda.CUDAGraph()
                    m.reset()
                    with torch.cuda.graph(graph):
                        out = m(x)
                torch.cuda.current_stream().wait_stream(s)
            graph.replay()
            torch.cuda.synchronize()
        affine = core is _li
        captured = scheme == "auto"
        assert calls.calls == 1 + captured, (core.__name__, scheme, calls)
        assert (calls.affine, calls.repaired) == \
            ((1 + captured) * affine, (1 + captured) * (not affine) * captured), calls
        assert _close(out, want, torch.float32) if affine else torch.equal(out, want)


test_affine_inference_replays_from_a_cuda_graph = pytest.mark.cuda(
    test_affine_inference_replays_from_a_cuda_graph)


@pytest.mark.cuda
def test_affine_training_replays_from_a_cuda_graph():
    """An affine core's training step, forward and backward, captured and
    replayed: the input's gradient that of the eager sequential step, to
    rounding."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    torch.manual_seed(0)
    m = _neuron(_li, "cuda")
    x = torch.rand(1024, 4, 6, device="cuda") * 2
    w = torch.rand(1024, 4, 6, device="cuda")

    def step(xg):
        m.reset()
        (m(xg) * w).sum().backward()
    want = x.clone().requires_grad_()
    step(want)
    xg = x.clone().requires_grad_()
    graph, _, calls = _captured(step, xg)
    xg.grad.zero_()
    graph.replay()
    torch.cuda.synchronize()
    assert calls.affine == 2 and calls.sequential == 0, calls
    assert _close(xg.grad, want.grad, torch.float32)


@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
def test_random_affine_cores_give_the_sequential_numbers_to_rounding(device, training):
    """Random one- and two-state affine cores in f64 (the compiler proves
    each affine; the chunks run from carries): outputs, final states and
    the gradients of the input and initial states, to rounding."""
    import numpy as np
    rng = np.random.default_rng(5)
    for case in range(8):
        num_states = 1 + case % 2
        torch.manual_seed(case)
        x = torch.rand(256, 4, 8, device=device, dtype=torch.float64)
        call = _random_call(_random_core(rng, num_states, affine=True), num_states, x, training)
        want = call()
        with flexsn.chunked_time(8) as calls:
            got = call()
        assert calls.affine == 1, (case, calls)
        for a, b in zip(got, want):
            assert _close(a, b, torch.float64), case


def test_auto_runs_the_sequential_scan_on_the_cpu_and_where_chunks_do_not_pay(device):
    """chunks="auto": on the CPU, and on a GPU for a call whose T steps take
    less than chunks add or whose NCL makes it bandwidth-bound, the
    sequential scan; on a GPU for many steps of few neurons, chunks."""
    from flexsn._runner import auto_chunks
    m = _neuron(_li, device)
    x = torch.rand(256, 4, 6, device=device)
    with torch.no_grad(), flexsn.chunked_time() as calls:
        m(x)
    assert calls.calls == 0
    cpu = torch.zeros(1)
    assert auto_chunks(65536, 256, cpu, False, True) is None
    if device != "cuda":
        return
    g = torch.zeros(1, device="cuda")
    assert auto_chunks(65536, 256, g, False, True) == 256  # 64K threads
    assert auto_chunks(16384, 1024, g, False, True) == 64
    assert auto_chunks(65536, 256, g, True, True) == 256
    assert auto_chunks(16384, 1024, g, True, True) is None  # eager training: host-bound
    assert auto_chunks(16384, 1024, g, True, False) == 64   # LIF's: fewer host ops
    assert auto_chunks(4096, 4096, g, True, False) is None
    assert auto_chunks(4096, 4096, g, False, True) is None  # eager: too few steps
    assert auto_chunks(65536, 8192, g, False, True) is None
    assert auto_chunks(1024, 16, g, False, True) is None    # too few steps to pay
    assert auto_chunks(65537, 256, g, False, True) is None  # no count divides T
    m = _neuron(_li, device)
    x = torch.rand(32768, 4, 6, device=device)
    with torch.no_grad():
        want = m(x)
        m.reset()
        with flexsn.chunked_time() as calls:
            got = m(x)
    assert (calls.calls, calls.affine) == (1, 1)
    assert _close(got, want, torch.float32)
