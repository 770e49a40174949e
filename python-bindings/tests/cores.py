"""Neuron cores used by the tests (written as a user would)."""

import torch

from flexsn import surrogate


def tutorial(beta=0.5, gamma=0.9, spike_fn=None):
    """The SpikingJelly tutorial's two-input, two-state, two-output neuron."""
    spike_fn = spike_fn or surrogate.ATan()

    def core(x, y, v, rho):
        h = beta * v + x
        s1 = spike_fn(h - (rho + 1.))
        s2 = spike_fn(h - 1.)
        rho = gamma * rho + s1
        v1 = h * (1. - s1)
        v2 = h - s2
        yy = torch.sigmoid(y)
        v = v1 * yy + v2 * (1. - yy)
        return s1, s2, v, rho
    return core


def lif(tau=2.0, v_th=1.0, spike_fn=None):
    spike_fn = spike_fn or surrogate.Sigmoid()

    def core(x, v):
        h = v + (x - v) / tau
        s = spike_fn(h - v_th)
        return s, h * (1. - s)
    return core
