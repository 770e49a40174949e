"""A FlexSN's training node under the ways PyTorch runs a backward besides
the plain one: compiled autograd (torch.compile of the backward, the
forward run eagerly), saved-tensor hooks that keep or copy what the node
saved (torch.autograd.graph.save_on_cpu), activation checkpointing, and a
graph that outlives its module. Each gives the gradients of the plain
backward."""

import gc

import pytest
import torch
from torch.utils.checkpoint import checkpoint

import flexsn
from conftest import assert_close
from cores import tutorial
from flexsn import _native



def _case(device, seed=0):
    """The tutorial core (two inputs, two states, a parameter) from given
    initial states, every leaf requiring grad."""
    g = torch.Generator().manual_seed(seed)
    shapes = [(6, 3, 8), (6, 3, 8), (3, 8), (3, 8)]
    leaves = [torch.randn(s, generator=g).to(device) for s in shapes]
    leaves[0] = leaves[0] * 2
    return leaves


def _grads(device, backward, seed=0, store=False):
    """Gradients of every leaf and of the module's parameter after
    `backward(loss)`, from a fresh module."""
    m = flexsn.FlexSN(tutorial(), 2, 2, 2, backend=device.type, store_state_seqs=store)
    leaves = [t.clone().requires_grad_() for t in _case(device, seed)]
    m.states = leaves[2:]
    s1, s2 = m(*leaves[:2])
    loss = (s1 * 3).sum() + (s2 * s2).sum()
    if store:
        loss = loss + m.state_seqs[0].sum()
    backward(loss)
    return [t.grad for t in leaves]


def _check(got, ref, what):
    for k, (a, b) in enumerate(zip(got, ref)):
        assert a is not None, f"{what}: leaf {k} got no gradient"
        assert_close(a, b, what=f"{what}, leaf {k}")


@pytest.mark.parametrize("recompute", [False, True], ids=["kept", "recomputed"])
def test_compiled_autograd(device, recompute):
    """The forward runs eagerly; compiled autograd captures the backward
    (the FlexSN node runs in it as an opaque call, and inside
    recompute_states() its forward kernel again) and gives the plain
    backward's gradients, for a second step too (its cached graph)."""
    import contextlib

    import torch._dynamo.compiled_autograd as ca
    torch._dynamo.reset()
    ctx = flexsn.recompute_states if recompute else contextlib.nullcontext

    def go():
        out = []
        for seed in (1, 2):
            ref = _grads(device, lambda loss: loss.backward(), seed)
            with ca._enable(torch.compile(backend="aot_eager")), ctx():
                got = _grads(device, lambda loss: loss.backward(), seed)
            _check(got, ref, f"compiled autograd, step {seed}")
            out.append(got)
        return out
    go()
    torch._dynamo.reset()


@pytest.mark.parametrize("pin", [False, True])
def test_save_on_cpu(device, pin):
    """save_on_cpu moves what the node saved to host memory and back; with
    pin_memory=True it copies every saved tensor (pinned where CUDA is
    present), the one that names the native node's kernels included."""
    ref = _grads(device, lambda loss: loss.backward())

    def go():
        m = flexsn.FlexSN(tutorial(), 2, 2, 2, backend=device.type)
        leaves = [t.clone().requires_grad_() for t in _case(device)]
        with torch.autograd.graph.save_on_cpu(pin_memory=pin):
            m.states = leaves[2:]
            s1, s2 = m(*leaves[:2])
        ((s1 * 3).sum() + (s2 * s2).sum()).backward()
        return [t.grad for t in leaves]
    _check(go(), ref, f"save_on_cpu(pin_memory={pin})")


def test_activation_checkpointing(device):
    """torch.utils.checkpoint (non-reentrant) drops what the node saved and
    runs the forward again in the backward."""
    ref = _grads(device, lambda loss: loss.backward())

    def go():
        m = flexsn.FlexSN(tutorial(), 2, 2, 2, backend=device.type)
        leaves = [t.clone().requires_grad_() for t in _case(device)]

        def block(x, y, h1, h2):
            m.states = [h1, h2]
            return m(x, y)
        s1, s2 = checkpoint(block, *leaves, use_reentrant=False)
        ((s1 * 3).sum() + (s2 * s2).sum()).backward()
        return [t.grad for t in leaves]
    _check(go(), ref, "checkpoint")


def test_graph_outlives_its_module(device):
    """A backward after its module was deleted (and collected) still runs
    the kernels it was built with."""
    ref = _grads(device, lambda loss: loss.backward(), store=True)

    def go():
        m = flexsn.FlexSN(tutorial(), 2, 2, 2, backend=device.type, store_state_seqs=True)
        leaves = [t.clone().requires_grad_() for t in _case(device)]
        m.states = leaves[2:]
        s1, s2 = m(*leaves[:2])
        loss = (s1 * 3).sum() + (s2 * s2).sum() + m.state_seqs[0].sum()
        del m, s1, s2
        gc.collect()
        loss.backward()
        return [t.grad for t in leaves]
    _check(go(), ref, "module deleted before backward")


def test_copied_keeper_of_a_released_binding_is_an_error(device):
    """Under a hook that copies what it saves, the native node finds its
    kernels by the binding's id; once the package has released that
    binding, its backward raises an error naming the cause. (A core of its
    own: bindings are shared by content across the process.)"""
    m = flexsn.FlexSN(tutorial(beta=0.4375), 2, 2, 2, backend=device.type)
    x, y = (t.clone().requires_grad_() for t in _case(device)[:2])
    with torch.autograd.graph.save_on_cpu(pin_memory=True):
        s1, s2 = m(x, y)
    pairs = [pair for p in m.kernel.compiled.prepared.values()
             for pair in (getattr(p, "seqs", None), getattr(p, "final", None))
             if pair is not None]
    ids = [pair.native for pair in pairs if pair.native is not None]
    assert ids, "no native training binding"
    for ident in ids:
        _native.release(ident)
    with pytest.raises(RuntimeError, match="kernels of this FlexSN training node were released"):
        (s1.sum() + s2.sum()).backward()
