"""DistributedDataParallel with a flexsn neuron: a few SGD steps of a small
spiking network (Conv2d -> LIFNode (ours) -> Linear) on two GPUs, one
process each (torchrun), against one GPU on the same global batch. The
parameters and gradients after the steps must agree within 1e-5 (fp32).

    python3 bench/ddp_check.py            # runs both and compares

Needs two GPUs. Not a CI test.
"""

import os
import subprocess
import sys
import tempfile

import torch
import torch.distributed as dist
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                "python-bindings"))
from flexsn import neuron  # noqa: E402

T, BATCH, STEPS = 4, 8, 3


class SpikingNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.lif = neuron.LIFNode(tau=2.0, step_mode="m")
        self.fc = nn.Linear(4 * 8 * 8, 3)

    def forward(self, x):  # [T, B, 2, 8, 8]
        self.lif.reset()
        t, b = x.shape[:2]
        h = self.conv(x.flatten(0, 1)).view(t, b, 4, 8, 8) * 2
        s = self.lif(h)
        return self.fc(s.flatten(2)).mean(0)


def data():
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(T, BATCH, 2, 8, 8, generator=g) for _ in range(STEPS)]
    ys = [torch.randint(0, 3, (BATCH,), generator=g) for _ in range(STEPS)]
    return xs, ys


def train(model, xs, ys, device, rank=0, world=1):
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    per = BATCH // world
    for x, y in zip(xs, ys):
        x = x[:, rank * per:(rank + 1) * per].to(device)
        y = y[rank * per:(rank + 1) * per].to(device)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    inner = model.module if hasattr(model, "module") else model
    return {n: (p.detach().cpu(), p.grad.detach().cpu()) for n, p in inner.named_parameters()}


def main_ddp(out):
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(rank)
    torch.manual_seed(1)
    model = SpikingNet().cuda(rank)
    ddp = nn.parallel.DistributedDataParallel(model, device_ids=[rank])
    result = train(ddp, *data(), torch.device("cuda", rank), rank, world)
    if rank == 0:
        torch.save(result, out)
    dist.destroy_process_group()


def main():
    if torch.cuda.device_count() < 2:
        sys.exit("needs two GPUs")
    torch.manual_seed(1)
    single = train(SpikingNet().cuda(0), *data(), torch.device("cuda", 0))
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "ddp.pt")
        subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
                        "--master_port=29517", __file__, "--ddp", out], check=True)
        ddp = torch.load(out)
    worst = 0.0
    for name, (p, g) in single.items():
        dp, dg = ddp[name]
        err = max((p - dp).abs().max().item(), (g - dg).abs().max().item())
        worst = max(worst, err)
        print(f"{name:12s} max |single - ddp| over parameter and gradient: {err:.2e}")
    print(f"DDP on 2 GPUs vs 1 GPU, {STEPS} SGD steps, T={T}, batch {BATCH}: "
          f"max difference {worst:.2e} ({'ok' if worst <= 1e-5 else 'FAIL'}, bound 1e-5)")
    sys.exit(0 if worst <= 1e-5 else 1)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--ddp":
        main_ddp(sys.argv[2])
    else:
        main()
