"""Modules survive the ways PyTorch users move them: torch.save / torch.load
of the whole module, copy.deepcopy, pickling and torch.multiprocessing spawn
(which pickles its arguments), state_dict round trips; a closure core that pickle
cannot store is an error that names it."""

import copy
import functools
import io
import pickle

import pytest
import torch

import flexsn
from flexsn import surrogate


def _reload(obj):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=False)


def module_level_core(x, v, tau=2.0):
    h = v + (x - v) / tau
    s = surrogate.Sigmoid(alpha=4.0)(h - 1.0)
    return s, h * (1.0 - s)


def lif_core(x, v):
    return module_level_core(x, v)


def _modules():
    return [flexsn.neuron.IFNode(step_mode="m"),
            flexsn.neuron.LIFNode(tau=3.0, v_reset=None, detach_reset=True, step_mode="m"),
            flexsn.neuron.ParametricLIFNode(step_mode="m"),
            flexsn.FlexSN(lif_core, num_states=1),
            flexsn.FlexSN(functools.partial(module_level_core, tau=4.0), num_inputs=1,
                          num_states=1)]


@pytest.mark.parametrize("k", range(5))
def test_save_load_copy_pickle(device, k):
    torch.manual_seed(k)
    m = _modules()[k].to(device)
    x = torch.randn(6, 2, 5, device=device) * 2
    want = m(x)
    for other in (_reload(m), copy.deepcopy(m), pickle.loads(pickle.dumps(m))):
        other.reset()
        torch.testing.assert_close(other(x), want)  # programs rebuilt on first use
    fresh = _modules()[k].to(device)
    fresh.load_state_dict(m.state_dict())
    fresh.reset()
    torch.testing.assert_close(fresh(x), want)


def test_closure_core_is_named():
    def make(tau):
        def core(x, v):
            return module_level_core(x, v, tau)
        return core
    m = flexsn.FlexSN(make(2.0), num_states=1)
    copy.deepcopy(m)  # a function copies as itself
    with pytest.raises(TypeError, match=r"core 'test_closure_core_is_named.<locals>.make."
                                        r"<locals>.core' is defined inside a function"):
        pickle.dumps(m)
    with pytest.raises(TypeError, match="closure"):
        pickle.dumps(flexsn.FlexSNKernel(make(2.0), 1, 1))


def _spawned(rank, models, x, path):
    """Runs in a process torch.multiprocessing spawned: each model, pickled
    as spawn's argument, called on `x`."""
    torch.save([m(x) for m in models], path)


def test_spawn_takes_modules_as_arguments(tmp_path):
    """torch.multiprocessing.spawn with the modules as an argument (pickled
    to a fresh interpreter, their programs rebuilt there)."""
    import torch.multiprocessing as mp
    torch.manual_seed(0)
    models = _modules()
    x = torch.randn(6, 2, 5) * 2
    want = [m(x) for m in models]
    for m in models:
        m.reset()
    path = str(tmp_path / "out.pt")
    mp.spawn(_spawned, args=(models, x, path), nprocs=1, join=True)
    for got, ref in zip(torch.load(path), want):
        torch.testing.assert_close(got, ref)
