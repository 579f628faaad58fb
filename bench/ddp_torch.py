"""The PyTorch side of bench/ddp_compare.py: DistributedDataParallel (gloo, CPU) on the same layers,
batch and optimizer as the dtrain side, timed between two barriers after warm-up steps.

A run is described by a dict cfg: layers and input (dtrain's --model list and its input shape),
batch (per rank), lr, momentum, classes. Errors are RuntimeError with the model and rank count."""

import datetime
import json
import os
import socket
import tempfile
import time

from torch_sequential import build_sequential, parse_input


def _env_prefix(env):
    return " ".join(f"{k}={v}" for k, v in env.items())


def worker(rank, world, port, cfg, steps, warmup, pin, out_path, seed):
    """One rank, in a fresh spawned interpreter; the thread variables were set in the parent's
    environment before the spawn, so OpenBLAS and OpenMP read them at load."""
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    if pin:
        cores = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cores[rank % len(cores)]})
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=300))
    torch.manual_seed(seed)
    in_shape = parse_input(cfg["input"])
    model = DDP(build_sequential(cfg["layers"], in_shape))
    opt = torch.optim.SGD(model.parameters(), lr=cfg["lr"], momentum=cfg["momentum"])

    # Data generated before timing: a few random batches per rank, cycled.
    g = torch.Generator().manual_seed(seed * 1000 + rank + 1)
    pool = 4
    batch = cfg["batch"]
    xs = [torch.randn((batch,) + in_shape, generator=g) for _ in range(pool)]
    ys = [torch.randint(0, cfg["classes"], (batch,), generator=g) for _ in range(pool)]

    def step(i):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(xs[i % pool]), ys[i % pool])
        loss.backward()
        opt.step()
        return loss

    for i in range(warmup):
        step(i)
    dist.barrier()
    t0 = time.perf_counter()
    for i in range(steps):
        loss = step(warmup + i)
    dist.barrier()
    t1 = time.perf_counter()
    if rank == 0:
        dt = t1 - t0
        with open(out_path, "w") as f:
            json.dump({"time_s": dt, "samples_per_s": world * batch * steps / dt,
                       "final_loss": float(loss.item()), "threads": torch.get_num_threads(),
                       "affinity": sorted(os.sched_getaffinity(0))}, f)
    dist.destroy_process_group()


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def describe(cfg, ranks, steps, warmup, pin, env):
    return (f"torch.multiprocessing.spawn(nprocs={ranks}) {_env_prefix(env)} "
            f"MASTER_ADDR=127.0.0.1 MASTER_PORT=<free>: torch.set_num_threads(1), "
            f"init_process_group('gloo'), DDP(nn.Sequential[{cfg['layers']}] on "
            f"{cfg['input']}), SGD(lr={cfg['lr']}, momentum={cfg['momentum']}), cross_entropy, "
            f"batch {cfg['batch']}/rank, {warmup} warm-up + {steps} timed steps"
            + (", rank r pinned to core r" if pin else ""))


def run(cfg, ranks, steps, warmup, pin, seed, env):
    """Runs DDP at `ranks` processes with the variables of env; returns rank 0's timing dict with
    wall_s and command added."""
    import torch.multiprocessing as mp
    for k, v in env.items():
        os.environ[k] = v
    with tempfile.TemporaryDirectory(prefix="ddp_compare.") as tmp:
        out = os.path.join(tmp, "torch.json")
        port = free_port()
        t0 = time.perf_counter()
        try:
            mp.spawn(worker, args=(ranks, port, cfg, steps, warmup, pin, out, seed),
                     nprocs=ranks, join=True, start_method="spawn")
        except Exception as e:                      # ProcessRaisedException / ProcessExitedException
            raise RuntimeError(f"PyTorch DDP run failed ({cfg['layers']}, {ranks} ranks): {e}")
        wall = time.perf_counter() - t0
        with open(out) as f:
            r = json.load(f)
    r["wall_s"] = wall
    r["command"] = describe(cfg, ranks, steps, warmup, pin, env)
    return r
