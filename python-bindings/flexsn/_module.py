"""The user API: the FlexSN module and the functional FlexSNKernel."""

from __future__ import annotations

import inspect
from typing import Callable, Optional, Sequence

import torch
from torch import nn

from . import _checks, _compiled, _layout, _ops, _recorder, _runner, _spikes

# Ours: the reference Python loop, or our compiled kernels on one device.
OWN_BACKENDS = ("torch", "cpu", "cuda")
# SpikingJelly's FlexSN names its kernel generators "triton", "inductor"
# and "hop"; code written for it passes them, and here each means what None
# does: our compiled kernels on the tensors' device.
SPIKINGJELLY_BACKENDS = ("triton", "inductor", "hop")
BACKENDS = OWN_BACKENDS + SPIKINGJELLY_BACKENDS


def _check_backend(backend: Optional[str]) -> Optional[str]:
    if backend is not None and backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(map(repr, BACKENDS))} "
                         f"or None (compiled on the tensors' device), got {backend!r}")
    return backend


def _check_device(backend: Optional[str], device: torch.device) -> None:
    if backend == "cpu" and device.type != "cpu":
        raise ValueError(f"backend 'cpu' runs CPU tensors, but the inputs are on {device}")
    if backend == "cuda" and device.type != "cuda":
        raise ValueError(f"backend 'cuda' runs CUDA tensors, but the inputs are on {device}")
    if device.type not in ("cpu", "cuda") and backend != "torch":
        raise ValueError(f"flexsn kernels run on cpu and cuda devices, not {device}; "
                         "use backend='torch'")


_NO_PLANS = (None,) * 4


def _slot(states) -> int:
    """Which of a module's or kernel's plans (see _runner.FastPathPlan) a call may
    take: one per grad mode and per start from given states or from none
    (a sequence's first call after reset() and the calls after it), so that
    alternating between them keeps every plan."""
    return 2 * torch.is_grad_enabled() + (states is None)


def _run_planned(owner, compiled, inputs, states):
    """A call ([T, *S] inputs) through the plan `owner` (a FlexSN or a
    FlexSNKernel, whose compiled core is `compiled`) keeps for it: (outputs, state
    sequences or None, final states), or None when it has none or the call
    does not match it."""
    if owner.__dict__.get("_param_perm") is not None:
        return None  # a plan's parameters are laid out by their own shape
    entry = owner.__dict__.get("_plans", _NO_PLANS)[_slot(states)]
    if entry is None or entry[1] != owner._plan_key():
        return None  # (a matching key also means `compiled` is the plan's core)
    params = compiled.param_tensors(owner.static_inputs) if compiled.traced.params else ()
    args = list(inputs)
    args += [None] * compiled.num_states if states is None else states
    args += params
    r = entry[0].call(args)
    if r is not None and _spikes._depth:
        _spikes.note_outputs(r[0], compiled.spike_outputs)
    return r


def _keep_plan(owner, states, record: list) -> None:
    """Keeps the plan run_compiled left in `record` (or none) in the slot of
    a call from `states`."""
    owner.__dict__.setdefault("_plans", [None] * 4)[_slot(states)] = \
        (record[0], owner._plan_key()) if record and record[0] is not None else None


def _num_step_inputs(core: Callable, num_states: int, num_static: int) -> int:
    try:
        sig = inspect.signature(core)
    except (TypeError, ValueError):
        raise TypeError("cannot read the core's signature; pass num_inputs=") from None
    positional = 0
    for p in sig.parameters.values():
        if p.kind == p.VAR_POSITIONAL:
            raise TypeError("the core takes *args: pass num_inputs= explicitly")
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            positional += 1
    n = positional - num_states - num_static
    if n < 1:
        raise ValueError(f"the core takes {positional} positional arguments, which "
                         f"leaves {n} step inputs after {num_states} states and "
                         f"{num_static} static inputs; it needs at least one input")
    return n


class _LocalCore:
    """A core defined inside a function, as a module or kernel's state holds
    it for copying and pickling: copy.deepcopy gets the function back (a
    function copies as itself); pickle, which cannot store a local function,
    gets an error naming it and saying what to do instead of pickle's own."""

    def __init__(self, core):
        self.core = core

    def __deepcopy__(self, memo):
        return self.core

    def __reduce__(self):
        name = getattr(self.core, "__qualname__", repr(self.core))
        raise TypeError(
            f"cannot pickle this flexsn module: its core {name!r} is defined inside a "
            "function (a closure), which pickle cannot store. Define the core at "
            "module level (with functools.partial for its settings) to save the module "
            "whole (torch.save(model)) or pass it to spawned processes; or save its "
            "state_dict instead")


def _guard_core(state: dict) -> None:
    core = state.get("core")
    if "<locals>" in getattr(core, "__qualname__", ""):
        state["core"] = _LocalCore(core)


class FlexSNKernel:
    """The functional form: ``kernel(*input_seqs, *init_states)`` returns
    ``(*output_seqs, *state_seqs)`` (``final_state=True``: the final states
    ``[N, ...]`` instead of the state sequences). Inputs are ``[T, N, ...]``,
    initial states ``[N, ...]``; gradients flow to every tensor that
    requires them (and to tensors the core captures).

    Arguments are those of SpikingJelly's tutorial FlexSNKernel: ``core``,
    ``num_inputs``, ``num_states``, ``num_outputs`` (checked against a trace),
    ``example_inputs`` (dtypes for the trace), ``requires_grad`` (a mask over
    inputs and states; None: all), ``backend`` and ``strict``.
    """

    def __init__(self, core: Callable, num_inputs: int, num_states: int,
                 num_outputs: Optional[int] = None, example_inputs=None,
                 requires_grad: Optional[Sequence[bool]] = None,
                 backend: Optional[str] = None, final_state: bool = False,
                 strict: bool = False, static_inputs: Sequence[torch.Tensor] = ()):
        if not callable(core):
            raise TypeError(f"core must be callable, got {type(core).__name__}")
        for name, v in (("num_inputs", num_inputs), ("num_states", num_states)):
            if not isinstance(v, int) or v < (1 if name == "num_inputs" else 0):
                raise ValueError(f"{name} must be an int >= "
                                 f"{1 if name == 'num_inputs' else 0}, got {v!r}")
        self.core, self.num_inputs, self.num_states = core, num_inputs, num_states
        self.static_inputs = tuple(static_inputs)
        self.backend = _check_backend(backend)
        self.final_state = bool(final_state)
        if requires_grad is not None:
            requires_grad = tuple(bool(r) for r in requires_grad)
            if len(requires_grad) != num_inputs + num_states:
                raise ValueError(f"requires_grad has {len(requires_grad)} entries; "
                                 f"expected {num_inputs + num_states} (inputs, then states)")
        self.requires_grad = requires_grad
        self._example_dtypes = [e.dtype for e in example_inputs or []
                                if isinstance(e, torch.Tensor)]
        self.compiled = None
        if self.backend != "torch":
            self.compiled = _compiled.try_compile(core, num_inputs, num_states,
                                                self.static_inputs, example_inputs, strict)
        if self.compiled is not None:
            _ops.handle_of(self.compiled)  # now, not while torch.compile traces
            found = self.compiled.num_outputs
        else:
            found = self._count_outputs(example_inputs)
        if num_outputs is not None and num_outputs != found:
            raise ValueError(f"num_outputs={num_outputs} but the core returns {found} "
                             f"outputs besides its {num_states} states")
        self.num_outputs = found

    def __getstate__(self):
        # Compiled programs (and the traced graph) are never pickled: they
        # are rebuilt from the core on first use after unpickling.
        state = dict(self.__dict__)
        state["compiled"] = "rebuild" if self.compiled is not None else None
        state.pop("_plans", None)  # closures over this process's kernels
        _guard_core(state)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)

    # Eager even inside a torch.compile'd call (a graph break there, once):
    # tracing the core is Python work that Dynamo would otherwise trace too.
    @torch.compiler.disable
    def _rebuild(self, static_inputs):
        examples = [torch.zeros(1, dtype=d) for d in self._example_dtypes] or None
        self.compiled = _compiled.CompiledCore(self.core, self.num_inputs, self.num_states,
                                             static_inputs, examples)
        _ops.handle_of(self.compiled)

    def _count_outputs(self, example_inputs) -> int:
        n = self.num_inputs + self.num_states
        device = _recorder.example_device(self.core, self.static_inputs, example_inputs)
        args = list(example_inputs)[:n] if example_inputs else \
            [torch.zeros(1, device=device)] * n
        with torch.no_grad():
            r = self.core(*args, *self.static_inputs)
        r = (r,) if isinstance(r, torch.Tensor) else tuple(r)
        return len(r) - self.num_states

    def kernel_params(self, static_inputs=None) -> Optional[list]:
        """Every parameter tensor a call's compiled kernels take, the ones
        the core closes over included; None when the call would not run
        compiled kernels (the torch loop, whose core reads its own tensors;
        a lazily rebuilt core before its rebuild)."""
        if self.backend == "torch" or not isinstance(self.compiled, _compiled.CompiledCore):
            return None
        return self.params(static_inputs)

    def params(self, static_inputs=None) -> list:
        statics = self.static_inputs if static_inputs is None else static_inputs
        if self.compiled is None:
            return list(statics)
        return self.compiled.param_tensors(statics)

    def run(self, inputs, init_states, *, want_seqs: bool, static_inputs=None,
            out_dtypes=None, plan: Optional[list] = None, param_perm=None):
        """(outputs, state sequences or None, final states). `plan`: see
        _runner.run_compiled (left empty when the call does not run there).
        `param_perm`: the inputs are a permuted view (see _layout) and every
        parameter tensor is laid out to match (compiled kernels only)."""
        statics = self.static_inputs if static_inputs is None else static_inputs
        device = inputs[0].device
        _check_device(self.backend, device)
        if isinstance(self.compiled, str):  # unpickled: rebuild lazily
            self._rebuild(statics)
        if self.compiled is None or self.backend == "torch":
            if init_states is None:
                init_states = [inputs[0].new_zeros(inputs[0].shape[1:])
                               for _ in range(self.num_states)]
            return _runner.run_torch(self.core, self.num_outputs, inputs, init_states,
                                     statics, want_seqs=want_seqs, out_dtypes=out_dtypes)
        mask = None
        if self.requires_grad is not None:
            mask = list(self.requires_grad) + [True] * len(self.compiled.traced.params)
        params = self.compiled.param_tensors(statics)
        if param_perm is not None:
            params = [_layout.param_view(p, param_perm) for p in params]
        if torch.compiler.is_compiling():  # opaque custom ops: no graph break
            return _ops.run(self.compiled, inputs, init_states, params,
                            want_seqs=want_seqs, grad_mask=mask)
        r = _runner.run_compiled(self.compiled, inputs, init_states, params,
                                 want_seqs=want_seqs, grad_mask=mask, plan=plan)
        if _spikes._depth:
            _spikes.note_outputs(r[0], self.compiled.spike_outputs)
        return r

    def __call__(self, *tensors):
        n = self.num_inputs + self.num_states
        if len(tensors) != n:
            raise TypeError(f"expected {self.num_inputs} input sequence(s) and "
                            f"{self.num_states} initial state(s), got {len(tensors)} tensors")
        inputs, states = tensors[:self.num_inputs], tensors[self.num_inputs:]
        compiling = torch.compiler.is_compiling()  # Dynamo traces the general path
        r = None if compiling else \
            _run_planned(self, self.compiled, inputs, states)
        if r is None:
            _checks.validate_sequences(inputs, states, self.num_inputs, self.num_states)
            record: Optional[list] = None if compiling else []
            r = self.run(inputs, states, want_seqs=not self.final_state, plan=record)
            if record is not None:
                _keep_plan(self, states, record)
        outs, seqs, finals = r
        return (*outs, *(finals if self.final_state else seqs))

    def _plan_key(self) -> tuple:
        """What a call's plan also depends on besides the tensors."""
        return (self.final_state, self.backend, self.compiled, self.requires_grad,
                _compiled.recompute_active(), _compiled.chunking())


class FlexSN(nn.Module):
    """A spiking neuron from a single-step core, run over time by compiled
    kernels (or the reference Python loop).

    Accepts both SpikingJelly APIs:

    * the tutorial's: ``FlexSN(core, num_inputs, num_states, num_outputs,
      example_inputs=None, example_outputs=None, requires_grad=None,
      step_mode="m", backend=..., store_state_seqs=False)``;
    * SpikingJelly 2.0's: ``FlexSN(core, num_states=..., static_inputs=(...),
      step_mode="m", store_state_seqs=False)``, the number of inputs read
      from the core's signature ``core(*inputs, *states, *static_inputs)``.

    The second positional argument is ``num_inputs`` in the first and
    ``num_states`` in the second, so ``FlexSN(core, n)`` with one positional
    count is refused as ambiguous: pass it by keyword.

    Multi-step (``step_mode="m"``): ``forward(*inputs)`` with inputs
    ``[T, N, ...]`` returns the output sequences (one tensor, or a tuple);
    single-step (``"s"``): inputs ``[N, ...]``. ``states`` holds the states
    after the last call (zeros from ``init_states`` before the first, and
    after ``reset()``); ``state_seqs`` the state sequences when
    ``store_state_seqs``. T == 0 launches nothing: outputs are empty and the
    states unchanged.

    backend: ``"torch"`` (the core in a Python loop), ``"cpu"`` (JIT-compiled
    kernels), ``"cuda"`` (PTX kernels); None (the default), and SpikingJelly's names
    ``"triton"``, ``"inductor"`` and ``"hop"``, mean compiled kernels on the
    tensors' device. ``strict=True`` raises :class:`flexsn.UnsupportedOpError` for an
    op the compiler lacks instead of falling back to ``"torch"`` with a
    warning.
    """

    def __init__(self, core: Callable, *args, num_inputs: Optional[int] = None,
                 num_states: Optional[int] = None, num_outputs: Optional[int] = None,
                 example_inputs=None, example_outputs=None, requires_grad=None,
                 step_mode: str = "m", backend: Optional[str] = None,
                 store_state_seqs: bool = False,
                 static_inputs: Sequence[torch.Tensor] = (), strict: bool = False):
        super().__init__()
        if not callable(core):
            raise TypeError(f"core must be callable, got {type(core).__name__}")
        names = ("num_inputs", "num_states", "num_outputs", "example_inputs",
                 "example_outputs", "requires_grad", "step_mode", "backend",
                 "store_state_seqs")
        if len(args) == 1 and num_inputs is None and num_states is None:
            raise TypeError(
                f"FlexSN(core, {args[0]!r}) is ambiguous: SpikingJelly's tutorial "
                "reads the second argument as num_inputs and SpikingJelly 2.0 as "
                "num_states; pass num_inputs=... and/or num_states=... by keyword")
        if len(args) == 2 and isinstance(args[1], (tuple, list)):
            names = ("num_states", "static_inputs")  # 2.0: (core, num_states, static_inputs)
        if len(args) > len(names):
            raise TypeError(f"FlexSN takes at most {len(names) + 1} positional arguments")
        given = dict(zip(names, args))
        keywords = {"num_inputs": num_inputs, "num_states": num_states,
                    "num_outputs": num_outputs, "static_inputs": static_inputs}
        for k in given:
            if keywords.get(k) not in (None, ()):
                raise TypeError(f"FlexSN got {k} both positionally and by keyword")
        num_inputs = given.get("num_inputs", num_inputs)
        num_states = given.get("num_states", num_states)
        num_outputs = given.get("num_outputs", num_outputs)
        example_inputs = given.get("example_inputs", example_inputs)
        example_outputs = given.get("example_outputs", example_outputs)
        requires_grad = given.get("requires_grad", requires_grad)
        step_mode = given.get("step_mode", step_mode)
        backend = given.get("backend", backend)
        store_state_seqs = given.get("store_state_seqs", store_state_seqs)
        static_inputs = given.get("static_inputs", static_inputs)

        if num_states is None:
            raise TypeError("FlexSN needs num_states")
        if step_mode not in ("s", "m"):
            raise ValueError(f"step_mode must be 's' or 'm', got {step_mode!r}")
        _check_backend(backend)
        static_inputs = tuple(static_inputs)
        for i, t in enumerate(static_inputs):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"static_inputs[{i}] must be a tensor, got {type(t).__name__}")
            if isinstance(t, nn.Parameter):
                self.register_parameter(f"static_input_{i}", t)
            else:
                self.register_buffer(f"static_input_{i}", t)
        self._num_static = len(static_inputs)
        if num_inputs is None:
            num_inputs = _num_step_inputs(core, num_states, len(static_inputs))
        self.kernel = FlexSNKernel(core, num_inputs, num_states, num_outputs,
                                   example_inputs, requires_grad, backend,
                                   strict=strict, static_inputs=static_inputs)
        self.core = core
        self.num_inputs, self.num_states = num_inputs, num_states
        self.num_outputs = self.kernel.num_outputs
        self.step_mode, self.backend = step_mode, backend
        self.store_state_seqs = bool(store_state_seqs)
        self.example_outputs = tuple(example_outputs) if example_outputs else None
        if self.example_outputs is not None and len(self.example_outputs) != self.num_outputs:
            raise ValueError(f"example_outputs has {len(self.example_outputs)} entries; "
                             f"the core has {self.num_outputs} outputs")
        self.states = None
        self.state_seqs = None

    def __getstate__(self):
        # Copies and pickles carry the states detached (mid-training they are
        # non-leaf tensors, which deepcopy refuses).
        state = dict(self.__dict__)
        state.pop("_plans", None)  # closures over this process's kernels
        for key in ("states", "state_seqs"):
            if state.get(key) is not None:
                state[key] = [t.detach() for t in state[key]]
        _guard_core(state)
        return state

    @property
    def static_inputs(self) -> tuple:
        return tuple(getattr(self, f"static_input_{i}") for i in range(self._num_static))

    @property
    def compiled(self) -> bool:
        """True when calls run compiled kernels (False: the Python loop)."""
        return self.kernel.compiled is not None and self.backend != "torch"

    @staticmethod
    def init_states(num_states: int, step_mode: str, *args) -> list:
        """Initial states: zeros shaped like one step of the first input.
        Override to start elsewhere."""
        if step_mode == "s":
            return [torch.zeros_like(args[0]) for _ in range(num_states)]
        if step_mode == "m":  # shape of one step, also when T == 0
            return [args[0].new_zeros(args[0].shape[1:]) for _ in range(num_states)]
        raise ValueError(f"Unsupported step mode: {step_mode}")

    def reset(self) -> None:
        # Plain attributes, set through __dict__: nn.Module.__setattr__
        # (its parameter/buffer/module bookkeeping) costs microseconds per
        # call, and these are set on every call.
        self.__dict__["states"] = None
        self.__dict__["state_seqs"] = None

    def _plan_key(self) -> tuple:
        """What a fast-path plan also depends on besides the tensors."""
        k = self.kernel
        return (self.step_mode, self.store_state_seqs, self.backend, k.backend,
                k.compiled, type(self).init_states,
                self.__dict__.get("_default_zero_states"), _compiled.recompute_active(),
                _compiled.chunking())

    def _fast(self, inputs):
        """The call through the plan this module keeps for it (see
        _runner.FastPathPlan); None when it has none or the call does not match."""
        if len(inputs) != self.num_inputs:
            return None
        if self.step_mode == "s":
            if not all(isinstance(x, torch.Tensor) for x in inputs):
                return None
            inputs = [x.unsqueeze(0) for x in inputs]
        r = _run_planned(self, self.kernel.compiled, inputs, self.__dict__["states"])
        if r is None:
            return None
        outs, seqs, finals = r
        self.__dict__["states"] = finals
        self.__dict__["state_seqs"] = seqs
        if self.step_mode == "s":
            outs = [o[0] for o in outs]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def forward(self, *inputs):
        planned = self._layout(inputs)
        if planned is not None:
            return self._forward_permuted(*planned, inputs)
        compiling = torch.compiler.is_compiling()  # Dynamo traces the general path
        if not compiling and "_plans" in self.__dict__:  # a call has left plans
            r = self._fast(inputs)
            if r is not None:
                return r
        if len(inputs) != self.num_inputs:
            raise TypeError(f"expected {self.num_inputs} input tensor(s), got {len(inputs)}")
        states = self.states
        custom_init = type(self).init_states is not FlexSN.init_states and \
            not getattr(self, "_default_zero_states", False)
        if states is None and custom_init:
            states = list(self.init_states(self.num_states, self.step_mode, *inputs))
        # states None: zeros, made inside the kernel where it can.
        _checks.validate_sequences(inputs, states, self.num_inputs, self.num_states,
                                   self.step_mode)
        single = self.step_mode == "s"
        if single:
            inputs = [x.unsqueeze(0) for x in inputs]
        out_dtypes = [e.dtype for e in self.example_outputs] if self.example_outputs else None
        plan: Optional[list] = None if compiling else []
        outs, seqs, finals = self.kernel.run(
            inputs, states, want_seqs=self.store_state_seqs,
            static_inputs=self.static_inputs, out_dtypes=out_dtypes, plan=plan,
            param_perm=self.__dict__.get("_param_perm"))
        if plan is not None:
            # The next call with this configuration skips the checks above.
            _keep_plan(self, states, plan)
        if out_dtypes and inputs[0].shape[0] == 0:
            outs = [o.to(d) for o, d in zip(outs, out_dtypes)]
        self.__dict__["states"] = list(finals)
        if single:
            outs = [o[0] for o in outs]
        self.__dict__["state_seqs"] = list(seqs) if seqs is not None else None
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _layout(self, inputs) -> Optional[tuple]:
        """(_layout.plan for the permutation under which every input
        sequence is contiguous, whether a parameter must be laid out to
        match), or None: step mode 's', no compiled kernels, inputs of other
        shapes or strides than the first, states not of a step's shape, or
        a parameter (a closed-over tensor too) that does not broadcast to a
        step."""
        if self.step_mode != "m" or not inputs or len(inputs) != self.num_inputs or \
                not all(isinstance(x, torch.Tensor) for x in inputs):
            return None
        x = inputs[0]
        if x.is_contiguous():  # the common call: no parameter lookup
            return None
        params = self.kernel.kernel_params(self.static_inputs) if self.compiled else None
        if params is None:
            return None
        layout = _layout.plan(x, params)
        if layout is None or any(y.shape != x.shape or y.stride() != x.stride()
                                 for y in inputs[1:]):
            return None
        states = self.__dict__.get("states")
        if states is not None and not all(isinstance(q, torch.Tensor) and
                                          q.shape == x.shape[1:] for q in states):
            return None
        return layout, _layout.needs_param_views(params)

    def _forward_permuted(self, layout: tuple, param_views: bool, inputs):
        """forward() on the inputs' contiguous permuted views (`param_views`:
        the parameters laid out to match), its results and the states it
        keeps in the inputs' layout."""
        perm, step, back, step_back = layout
        d = self.__dict__
        if d.get("states") is not None:
            d["states"] = [q.permute(step) for q in d["states"]]
        if param_views:
            d["_param_perm"] = step
        try:
            r = self.forward(*[x.permute(perm) for x in inputs])
        finally:  # the kept states back in the inputs' layout, whatever happened
            d.pop("_param_perm", None)
            if d.get("states") is not None:
                d["states"] = [q.permute(step_back) for q in d["states"]]
        if d.get("state_seqs") is not None:
            d["state_seqs"] = [q.permute(back) for q in d["state_seqs"]]
        if isinstance(r, tuple):
            return tuple(o.permute(back) for o in r)
        return r.permute(back)

    def extra_repr(self) -> str:
        return (f"num_inputs={self.num_inputs}, num_states={self.num_states}, "
                f"num_outputs={self.num_outputs}, step_mode={self.step_mode!r}, "
                f"backend={self.backend!r}, compiled={self.compiled}, "
                f"store_state_seqs={self.store_state_seqs}")
