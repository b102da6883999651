"""A plain PyTorch DDP training script whose gradients the P4 switch sums.

One rank per worker machine, launched by torchrun (on each worker, R its place in the job):

    torchrun --nnodes 2 --node-rank R --nproc-per-node 1 --master-addr <first worker's IP> \\
        examples/ddp_switch.py --topology topo.json

It trains a small MLP on scikit-learn's 8x8 digits (shipped with the package: nothing is
downloaded), each rank on its own shard. Apart from the lines marked `natswitch`, it is
ordinary DDP: torchrun starts the processes, init_process_group("gloo") reads its env://
rendezvous, DDP broadcasts rank 0's model. With --aggregation switch (default) the
gradients go through the switch (worker/ddp/attach.py finds the host, job, session and
port from topo.json); with --aggregation gloo, Gloo's own allreduce carries them.

Each rank prints its loss per step, then its test accuracy and a digest of its parameters:
ranks that trained in lockstep print the same digest.
"""

import argparse
import hashlib

import torch
import torch.distributed as dist
from sklearn.datasets import load_digits
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from worker.ddp import natswitch_hook  # natswitch


def digits(rank: int, world: int):
    """This rank's shard of the training set, and the test set (the last 297 digits)."""
    x, y = load_digits(return_X_y=True)
    x = torch.tensor(x / 16.0, dtype=torch.float32)
    y = torch.tensor(y, dtype=torch.int64)
    train, test = slice(0, 1500), slice(1500, None)
    return (x[train][rank::world], y[train][rank::world]), (x[test], y[test])


def digest(model: nn.Module) -> str:
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().numpy().tobytes())
    return h.hexdigest()[:16]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topology", default="topo.json",
                    help="the topology file the controller programmed the switch from, with "
                    "its sessions.json beside it (default %(default)s)")
    ap.add_argument("--aggregation", choices=("switch", "gloo"), default="switch")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--batch", type=int, default=32, help="examples per rank and step")
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--compressor", default="none",
                    help="applied before the switch, e.g. ef:topk:0.1 (switch only)")
    args = ap.parse_args()

    dist.init_process_group("gloo")            # torchrun's env:// (RANK, WORLD_SIZE, ...)
    rank, world = dist.get_rank(), dist.get_world_size()
    (x, y), (x_test, y_test) = digits(rank, world)
    torch.manual_seed(rank)                    # ranks differ; DDP broadcasts rank 0's model
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    ddp = DDP(model)
    comm = None
    if args.aggregation == "switch":
        comm = natswitch_hook(ddp, topology=args.topology,             # natswitch
                              compressor=args.compressor)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    batches = torch.Generator().manual_seed(1000 + rank)
    for step in range(1, args.steps + 1):
        idx = torch.randint(len(x), (args.batch,), generator=batches)
        loss = nn.functional.cross_entropy(ddp(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()                        # the switch (or Gloo) sums the gradients here
        opt.step()
        print(f"rank {rank} step {step} loss {loss.item():.4f}", flush=True)
    with torch.no_grad():
        accuracy = (model(x_test).argmax(1) == y_test).float().mean().item()
    print(f"rank {rank} test accuracy {accuracy:.4f} parameters {digest(model)}", flush=True)
    if comm is not None:
        print(f"rank {rank} {comm}", flush=True)
        comm.close()                                                    # natswitch
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
