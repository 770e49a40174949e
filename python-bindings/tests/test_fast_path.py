"""The fast path of FlexSN.forward and FlexSNKernel.__call__: a call with
the configuration of an earlier one in its slot (grad mode; from given
states or from none) — dtype, device, shape, which tensors require grad,
states, parameters — runs through that call's plan, without the general
path's checks and lookups. It must give the general path's results bit for
bit and step aside for any call that differs."""

import copy
import pickle

import pytest
import torch

import flexsn
from flexsn import _compiled, _runner
from cores import lif, tutorial
from conftest import LaunchSpy


class Counted:
    """Counts the calls that took the general path (run_compiled)."""

    def __init__(self, monkeypatch):
        self.general = 0
        real = _runner.run_compiled

        def counting(*a, **k):
            self.general += 1
            return real(*a, **k)
        monkeypatch.setattr(_runner, "run_compiled", counting)


def pair(make):
    """Two equal modules: the first may take the fast path, the second never."""
    fast, slow = make(), make()
    slow.__dict__["_fast"] = lambda inputs: None
    return fast, slow


def same(a, b, what):
    a = a if isinstance(a, (tuple, list)) else (a,)
    b = b if isinstance(b, (tuple, list)) else (b,)
    assert len(a) == len(b), what
    for k, (x, y) in enumerate(zip(a, b)):
        if x is None or y is None:
            assert x is None and y is None, f"{what} #{k}"
            continue
        assert x.shape == y.shape and x.dtype == y.dtype, f"{what} #{k}"
        assert torch.equal(x, y), f"{what} #{k}: not bit-identical"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_repeated_calls_take_the_plan_and_match(device, dtype, monkeypatch):
    counted = Counted(monkeypatch)
    fast, slow = pair(lambda: flexsn.FlexSN(tutorial(), num_inputs=2, num_states=2,
                                            store_state_seqs=True).to(device))
    g = torch.Generator().manual_seed(3)
    for step in range(4):
        x = (torch.randn(6, 3, 10, generator=g) * 2).to(device, dtype)
        y = torch.randn(6, 3, 10, generator=g).to(device, dtype)
        if step == 2:
            fast.reset()
            slow.reset()
        with torch.no_grad():
            same(fast(x, y), slow(x, y), f"outputs, call {step}")
        same(fast.states, slow.states, "states")
        same(fast.state_seqs, slow.state_seqs, "state sequences")
    # `slow` took the general path 4 times, `fast` twice: its first call
    # (from no states) and its second (from the first's); after the reset,
    # each had its plan
    assert counted.general == 4 + 2


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_training_through_the_plan_matches(device, dtype, monkeypatch):
    counted = Counted(monkeypatch)
    fast, slow = pair(lambda: flexsn.FlexSN(tutorial(), num_inputs=2,
                                            num_states=2).to(device))
    g = torch.Generator().manual_seed(5)
    for step in range(3):
        fast.reset()
        slow.reset()
        x = (torch.randn(5, 24, generator=g) * 2).to(device, dtype)
        y = torch.randn(5, 24, generator=g).to(device, dtype)
        grads = [torch.randn(5, 24, generator=g).to(device, dtype) for _ in range(2)]
        leaves = []
        for m in (fast, slow):
            xs = [x.clone().requires_grad_(), y.clone().requires_grad_()]
            out = m(*xs)
            torch.autograd.backward(out, grads)
            leaves.append((out, [t.grad for t in xs]))
        same(leaves[0][0], leaves[1][0], f"outputs, step {step}")
        same(leaves[0][1], leaves[1][1], f"input gradients, step {step}")
    assert counted.general == 1 + 3


def test_alternating_training_and_inference_keeps_both_plans(device, monkeypatch):
    counted = Counted(monkeypatch)
    fast, slow = pair(lambda: flexsn.FlexSN(lif(), num_states=1).to(device))
    x = torch.randn(4, 16, device=device) * 2
    for _ in range(4):
        grads, evals = [], []
        for m in (fast, slow):
            m.reset()
            xg = x.clone().requires_grad_()
            m(xg).sum().backward()
            grads.append(xg.grad)
            m.reset()
            with torch.no_grad():
                evals.append(m(x))
        same(grads[0], grads[1], "training step")
        same(evals[0], evals[1], "evaluation")
    assert counted.general == 2 + 8  # fast: the first of each; slow: all


def test_states_carried_in_training_keep_their_gradient(device):
    """Without a reset, the next call starts from the last call's final
    states (which require grad): gradients reach the first call's inputs."""
    fast, slow = pair(lambda: flexsn.FlexSN(lif(), num_states=1).to(device))
    x1 = torch.randn(4, 16, device=device) * 2
    x2 = torch.randn(4, 16, device=device) * 2
    grads = []
    for m in (fast, slow):
        a, b = x1.clone().requires_grad_(), x2.clone().requires_grad_()
        m(a)
        m(b)
        m(b).sum().backward()  # third call: the plan of the second
        grads.append((a.grad, b.grad))
    assert grads[0][0] is not None and grads[0][0].abs().sum() > 0
    same(grads[0], grads[1], "gradients through carried states")


def test_final_states_of_a_sequence_pair_through_the_plan(device, monkeypatch):
    """A program without a final-state training pair (here: the pair
    hidden from the tutorial's core, as for a core the compiler built none
    for): a call that wants only final states takes the last steps of the
    sequences, inside the operator. Carried without a reset, they keep
    their gradient: the third call's backward reaches the first call's
    inputs, as on the general path."""
    from flexsn import _native
    init = _compiled.TrainingConfig.__init__

    def without_final_pair(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self._has_final = False
    monkeypatch.setattr(_compiled.TrainingConfig, "__init__", without_final_pair)

    def go():
        counted = Counted(monkeypatch)
        fast, slow = pair(lambda: flexsn.FlexSN(tutorial(), num_inputs=2,
                                                num_states=2).to(device))
        g = torch.Generator().manual_seed(9)
        xs = [[(torch.randn(4, 3, 8, generator=g) * 2).to(device) for _ in range(2)]
              for _ in range(3)]
        got = []
        for m in (fast, slow):
            leaves = [[t.clone().requires_grad_() for t in call] for call in xs]
            outs = [m(*call) for call in leaves]
            states = list(m.states)
            loss = sum(o.sum() for o in outs[-1]) + sum((s * s).sum() for s in states)
            loss.backward()
            got.append((outs, states, [t.grad for call in leaves for t in call]))
        prep = next(p for p in fast.kernel.compiled.prepared.values()
                    if isinstance(p, _compiled.TrainingConfig))
        assert not prep._has_final  # the case under test
        assert counted.general == 2 + 3  # fast: calls 1 and 2 (two slots)
        for k in range(3):
            same(got[0][0][k], got[1][0][k], f"outputs of call {k}")
        same(got[0][1], got[1][1], "final states")
        assert all(s.shape == (3, 8) and s.grad_fn is not None for s in got[0][1])
        assert got[0][2][0].abs().sum() > 0  # through two calls' states
        same(got[0][2], got[1][2], "input gradients")
        plan = fast.__dict__["_plans"][2][0]  # grad mode, from given states
        if _native.ops() is not None:
            assert plan.native is not None and plan.final
            # as recorded: inputs and (carried) states all require grad
            args = [t.clone().requires_grad_() for t in xs[0]] + \
                [s.detach().requires_grad_() for s in got[0][1]]
            res = _native.run_plan(plan.native, args)
            assert [tuple(r.shape) for r in res] == [(4, 3, 8)] * 2 + [(3, 8)] * 2
    go()


def test_captured_parameter_gradient_accumulates(device, monkeypatch):
    counted = Counted(monkeypatch)

    def make():
        w = torch.nn.Parameter(torch.full((16,), 0.25, device=device))

        def core(x, v, w):
            h = v + (x - v) * torch.sigmoid(w)
            s = flexsn.surrogate.Sigmoid()(h - 1.)
            return s, h * (1. - s)
        return flexsn.FlexSN(core, num_states=1, static_inputs=(w,))
    fast, slow = pair(make)
    x = torch.randn(5, 16, device=device) * 2
    for m in (fast, slow):
        for _ in range(3):
            m.reset()
            m(x).sum().backward()
    assert counted.general == 1 + 3
    same(fast.static_input_0.grad, slow.static_input_0.grad, "accumulated gradient")


def test_any_change_takes_the_general_path(device, monkeypatch):
    """Each change of configuration between calls: the call still gives the
    general path's result (and the next identical call the plan's)."""
    counted = Counted(monkeypatch)
    fast, slow = pair(lambda: flexsn.FlexSN(lif(), num_states=1).to(device))
    g = torch.Generator().manual_seed(9)

    def x_of(*shape, dtype=torch.float32):
        return (torch.randn(*shape, generator=g) * 2).to(device, dtype)

    def both(fn, what):
        fast.reset()
        slow.reset()
        same(fn(fast), fn(slow), what)

    x = x_of(4, 8)
    both(lambda m: m(x), "first")
    before = counted.general
    both(lambda m: m(x), "repeat")
    assert counted.general == before + 1  # only `slow`
    t7, n9, s3 = x_of(7, 8), x_of(4, 9), x_of(4, 2, 4)
    bf, nc, rg = x_of(4, 8, dtype=torch.bfloat16), x_of(8, 4).t(), x.clone().requires_grad_()
    changes = [
        ("another T", lambda m: m(t7)),
        ("another N", lambda m: m(n9)),
        ("another shape, same numel", lambda m: m(s3)),
        ("another dtype", lambda m: m(bf)),
        ("non-contiguous", lambda m: m(nc)),
        ("no grad", lambda m: torch.no_grad()(m)(x)),
        ("requires grad", lambda m: m(rg)),
    ]
    for what, fn in changes:
        before = counted.general
        both(fn, what)
        assert counted.general == before + 2, what  # both took the general path
    # states the user set: their shape and dtype are checked as ever
    for m in (fast, slow):
        m.reset()
        m(x)
        m.states = [torch.zeros(5, device=device)]
        with pytest.raises(ValueError, match="state #0 has 5 elements per step"):
            m(x)
        m.states = [torch.zeros(8, device=device, dtype=torch.float64)]
        with pytest.raises(TypeError, match="state #0 has dtype torch.float64"):
            m(x)
        with pytest.raises(TypeError, match="expected 1 input tensor"):
            m(x, x)


def test_module_settings_changed_between_calls(device):
    fast, slow = pair(lambda: flexsn.FlexSN(lif(), num_states=1).to(device))
    x = torch.randn(3, 8, device=device) * 2
    for m in (fast, slow):
        m(x)
        m.store_state_seqs = True
        m.reset()
        m(x)
    same(fast.state_seqs, slow.state_seqs, "state sequences after the switch")
    assert fast.state_seqs[0].shape == (3, 8)
    for m in (fast, slow):
        m.backend = "torch"
        m.reset()
    same(fast(x), slow(x), "the Python loop after the switch")


def test_custom_initial_states_are_not_skipped(device):
    class Offset(flexsn.FlexSN):
        @staticmethod
        def init_states(num_states, step_mode, *args):
            return [args[0].new_full(args[0].shape[1:], 0.7)]

    m = Offset(lif(), num_states=1).to(device)
    ref = flexsn.FlexSN(lif(), num_states=1).to(device)
    x = torch.randn(3, 8, device=device)
    for _ in range(3):
        m.reset()
        out = m(x)
        ref.states = [torch.full((8,), 0.7, device=device)]
        same(out, ref(x), "from the overridden initial states")


def test_single_step_mode_through_the_plan(device, monkeypatch):
    counted = Counted(monkeypatch)
    single = flexsn.FlexSN(tutorial(), num_inputs=2, num_states=2, step_mode="s").to(device)
    multi = flexsn.FlexSN(tutorial(), num_inputs=2, num_states=2).to(device)
    x, y = torch.randn(6, 4, 5, device=device) * 2, torch.randn(6, 4, 5, device=device)
    outs = [single(x[t], y[t]) for t in range(6)]
    assert counted.general == 2  # step 0 (from no states) and step 1 (from step 0's)
    ref = multi(x, y)
    for k in range(2):
        same(torch.stack([o[k] for o in outs]), ref[k], f"output {k}")
    same(single.states, multi.states, "final states")


def module_level_lif(x, v):
    """A module-level core (pickle stores functions by reference)."""
    h = v + (x - v) / 2.0
    s = flexsn.surrogate.Sigmoid()(h - 1.0)
    return s, h * (1.0 - s)


def test_pickle_and_deepcopy_after_planned_calls(device):
    m = flexsn.FlexSN(module_level_lif, num_states=1).to(device)
    x = torch.randn(3, 8, device=device)
    m(x)
    m(x)
    assert any(p is not None for p in m.__dict__["_plans"])
    for clone in (copy.deepcopy(m), pickle.loads(pickle.dumps(m))):
        assert "_plans" not in clone.__dict__
        clone.reset()
        m.reset()
        same(clone(x), m(x), "a copy's call")


def test_plan_launches_one_kernel_per_call(device, monkeypatch):
    spy = LaunchSpy(monkeypatch)
    m = flexsn.FlexSN(lif(), num_states=1).to(device)
    x = torch.randn(3, 8, device=device)
    with torch.no_grad():
        m(x)
        m.reset()
        with spy:
            m(x)
            m.reset()
            m(x)
    # final_state kernels, each reading a null initial state
    assert spy.launches == [("final_state", [("init_state", 0)])] * 2


def kernel_pair(**kw):
    """Two equal FlexSNKernels (the tutorial's functional API); the second
    never takes the fast path."""
    fast = flexsn.FlexSNKernel(tutorial(), 2, 2, **kw)
    slow = flexsn.FlexSNKernel(tutorial(), 2, 2, **kw)
    slow._plan_key = lambda: object()  # never equal to a recorded key
    return fast, slow


@pytest.mark.parametrize("final_state", [False, True])
def test_functional_kernel_repeated_calls(device, final_state, monkeypatch):
    counted = Counted(monkeypatch)
    fast, slow = kernel_pair(final_state=final_state)
    g = torch.Generator().manual_seed(11)
    for step in range(3):
        x = (torch.randn(5, 2, 6, generator=g) * 2).to(device)
        y = torch.randn(5, 2, 6, generator=g).to(device)
        v, rho = (torch.randn(2, 6, generator=g).to(device) for _ in range(2))
        with torch.no_grad():
            same(fast(x, y, v, rho), slow(x, y, v, rho), f"inference, call {step}")
        res = []
        for k in (fast, slow):
            xs = [x.clone().requires_grad_(), y.clone().requires_grad_(),
                  v.clone().requires_grad_(), rho.clone()]
            out = k(*xs)
            torch.autograd.backward([out[0], out[2]], [torch.ones_like(out[0]),
                                                       torch.ones_like(out[2])])
            res.append((out, [t.grad for t in xs]))
        same(res[0][0], res[1][0], f"training outputs, call {step}")
        same(res[0][1], res[1][1], f"gradients, call {step}")
    # the general path: fast's first inference and first training call,
    # and every call of slow
    assert counted.general == 2 + 6


def test_functional_kernel_checks_what_changed(device):
    fast, slow = kernel_pair()
    x, y = torch.randn(4, 6, device=device), torch.randn(4, 6, device=device)
    v, rho = torch.zeros(6, device=device), torch.zeros(6, device=device)
    for k in (fast, slow):
        k(x, y, v, rho)
        k(x, y, v, rho)
        with pytest.raises(ValueError, match="state #0 has 5 elements per step"):
            k(x, y, torch.zeros(5, device=device), rho)
        with pytest.raises(TypeError, match="dtype"):
            k(x, y.double(), v, rho)
        with pytest.raises(TypeError, match="expected 2 input sequence"):
            k(x, y, v)
    same(fast(x[:2], y[:2], v, rho), slow(x[:2], y[:2], v, rho), "another T")
    same(fast(x.t().contiguous().t(), y, v, rho), slow(x, y, v, rho), "a copy of x")


def test_functional_kernel_pickles_without_its_plan():
    k = flexsn.FlexSNKernel(module_level_lif, 1, 1)
    x, v = torch.randn(3, 4), torch.zeros(4)
    k(x, v)
    assert any(p is not None for p in k.__dict__["_plans"])
    k2 = pickle.loads(pickle.dumps(k))
    assert "_plans" not in k2.__dict__
    same(k2(x, v), k(x, v), "the unpickled kernel")
