"""Per-call overhead of a FlexSN call from Python: wall time of one call at
T=1, NCL=1024 (LIF), minus the kernels' own time, for the eager path
(FlexSNKernel.run, through the package's operators) and the custom-op path
that torch.compile uses (the same call through torch.ops.flexsn.*),
inference and a training step (forward + backward), next to the Python
loop's training step and to PyTorch's own floors (one op; one op, a sum,
their backward). Then the modules as users call them, each reset before a
call: our FlexSN (and again with its fast path off), and,
when SpikingJelly 2.0 is installed, its FlexSN and LIFNode (the Triton
backend on CUDA), with the same core (bench/compare.py builds all three).
Median wall time of 2000 calls after warm-up (500 for the modules). At this
size the kernels themselves take a few microseconds (launch latency), so
the figures are the overhead.

    python3 bench/overhead.py [cuda|cpu] [--layers]
    python3 bench/overhead.py [cuda|cpu] --modules CORE[:SYSTEM,...]

--modules: only the module rows, for CORE (lif or 2in2st, bench/compare.py's
cores; 2in2st takes two inputs, here the same tensor twice) and the
systems named (default: all four), e.g. for an A/B of two builds.

--layers: where a module inference call's time goes instead, layer by
layer from the operator of libFlexSNTorch.so out to the call as the
module rows time it (reset, torch.no_grad(), the module), each row the
median wall time of the call through that layer.
"""

import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                "python-bindings", "tests"))
import flexsn  # noqa: E402
from flexsn import _ops  # noqa: E402
from cores import lif  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402


def median_us(fn, calls, sync):
    for _ in range(calls // 10):
        fn()
    sync()
    walls = []
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        walls.append(time.perf_counter() - t)
    sync()
    return statistics.median(walls) * 1e6


def layers(dev, sync):
    """A module inference call (LIF, T=1 NCL=1024, states from none), timed
    through each layer of its fast path: each row adds one layer to the
    row above it."""
    from flexsn import _module, _native
    m = flexsn.FlexSN(lif(), num_states=1).to(dev)
    x = torch.randn(1, 1024, device=dev)
    with torch.no_grad():
        for _ in range(3):
            m.reset()
            m(x)
    m.reset()
    with torch.no_grad():
        plan = m.__dict__["_plans"][_module._slot(None)][0]
    args, xs = [x, None], (x,)
    rows = []
    if plan.native is not None:
        native = plan.native
        rows.append(("operator run_plan", lambda: _native.run_plan(native, args)))
    # From _fast on, each call starts from no states again (a call leaves
    # its final states, whose plan is another slot's).
    reset = m.reset
    cc = m.kernel.compiled
    rows += [
        ("FastPathPlan.call", lambda: plan.call(args, [x], None, ())),
        ("_run_planned (module's plan)", lambda: _module._run_planned(m, cc, xs, None)),
        ("m.reset(); m._fast((x,))", lambda: (reset(), m._fast(xs))),
        ("m.reset(); m.forward(x)", lambda: (reset(), m.forward(x))),
        ("m.reset(); m(x)", lambda: (reset(), m(x))),
    ]
    print(f"device {dev}; module inference, LIF T=1 NCL=1024, states from none; "
          "call path " + _native.status().split(":")[0])
    with torch.no_grad():
        for name, fn in rows:
            print(f"{name:34s} {median_us(fn, 3000, sync):8.1f} us")
        print(f"{'torch  x * 2':34s} {median_us(lambda: x * 2, 3000, sync):8.1f} us")

    def whole():
        m.reset()
        with torch.no_grad():
            m(x)
    print(f"{'reset, with no_grad(): m(x)':34s} {median_us(whole, 3000, sync):8.1f} us"
          "  (the module inference row of the default run)")


def call_paths(dev, x, v0, xg):
    """The call paths below the modules (LIF's kernel, eager and through
    the custom ops) and PyTorch's own floors, by name."""
    k = flexsn.FlexSNKernel(lif(), 1, 1, backend=dev.type)
    cc = k.compiled
    return {
        "eager  inference": lambda: k.run([x], [v0], want_seqs=False),
        # the functional API as users call it (its fast path after the first)
        "kernel inference": lambda: k(x, v0),
        "kernel train step": lambda: k(xg, v0)[0].sum().backward(),
        "op     inference": lambda: _ops.run(cc, [x], [v0], [], want_seqs=False),
        "eager  train step": lambda: k.run([xg], [v0], want_seqs=False)[0][0].sum().backward(),
        "op     train step": lambda: _ops.run(cc, [xg], [v0], [], want_seqs=False)[0][0].sum().backward(),
        "torch  loop train": lambda: (lambda s: s.sum().backward())(
            lif()(xg[0], v0)[0]),
        # PyTorch's own floor for a training step: one elementwise op, its
        # sum and the backward through both (the autograd engine's hand-off
        # to its device thread and back included). Ours minus this is what
        # the package adds.
        "torch  mul+sum bwd": lambda: (xg * 2).sum().backward(),
        # and for an inference call: one elementwise op that allocates its
        # result and launches one kernel
        "torch  mul": lambda: x * 2,
    }


def main():
    if "--layers" in sys.argv:
        sys.argv.remove("--layers")
        dev = torch.device(sys.argv[1] if len(sys.argv) > 1 else
                           ("cuda" if torch.cuda.is_available() else "cpu"))
        layers(dev, torch.cuda.synchronize if dev.type == "cuda" else (lambda: None))
        return
    core, systems = "lif", ("flexsn", "flexsn general", "sj-flexsn", "sj-lifnode")
    only_modules = "--modules" in sys.argv
    if only_modules:
        at = sys.argv.index("--modules")
        spec = sys.argv[at + 1]
        del sys.argv[at:at + 2]
        core, _, named = spec.partition(":")
        if named:
            systems = tuple(n.replace("-general", " general") for n in named.split(","))
    dev = torch.device(sys.argv[1] if len(sys.argv) > 1 else
                       ("cuda" if torch.cuda.is_available() else "cpu"))
    x = torch.randn(1, 1024, device=dev)
    v0 = torch.zeros(1024, device=dev)
    xg = x.clone().requires_grad_()
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    print(f"device {dev}" + (f" ({torch.cuda.get_device_name(dev)})" if dev.type == "cuda" else "")
          + f"; {'LIF' if core == 'lif' else core} T=1 NCL=1024 (the kernels move "
          "12-40 KB: a few microseconds)")

    def report(name, fn, calls):
        print(f"{name:24s} {median_us(fn, calls, sync):8.1f} us per call (median wall time)")

    if not only_modules:
        for name, fn in call_paths(dev, x, v0, xg).items():
            report(name, fn, 2000)
    n_in = compare.CORE_SHAPES[core][0]
    # The modules as a user calls them: reset, then a call on [T=1, NCL].
    # "flexsn general": ours with the fast path off (every call through the
    # general path's checks and lookups), for the difference it makes.
    for system in systems:
        try:
            built = compare.make_system(system.split()[0], core, dev.type)
            if built is not None and system == "flexsn general":
                built = compare.without_fast_path(built)
        except Exception as e:  # noqa: BLE001 (a peer that cannot run here)
            print(f"{system:24s} not run: {type(e).__name__}: {str(e).splitlines()[0][:80]}")
            continue
        if built is None:
            print(f"{system:24s} not run: not installed")
            continue
        call, reset = built

        def infer(call=call, reset=reset):
            reset()
            with torch.no_grad():
                call(*[x] * n_in)

        def train(call=call, reset=reset):
            reset()
            call(*[xg] * n_in)[0].sum().backward()

        for what, fn in (("inference", infer), ("train step", train)):
            try:
                report(f"{system} {what}", fn, 500)
            except Exception as e:  # noqa: BLE001
                print(f"{system + ' ' + what:24s} not run: {type(e).__name__}: "
                      f"{str(e).splitlines()[0][:80]}")


if __name__ == "__main__":
    main()
