"""The two sides of test_torch_parity.py: a dtrain run and the PyTorch loop it must equal, on the
same IDX samples, batches, starting weights and settings. Imported after torch and numpy are known
to be there."""
import json, os, struct, subprocess

import numpy as np
import torch

from torch_sequential import build_sequential

MEAN, STD = 0.2, 0.3  # --normalize standard:MEAN:STD, fixed so no statistics pass is involved


def read_idx(path):
    with open(path, "rb") as f:
        _, _, typ, ndim = struct.unpack(">BBBB", f.read(4))
        dims = struct.unpack(">" + "I" * ndim, f.read(4 * ndim))
        assert typ == 0x08, "make_idx.py writes ubyte"
        return np.frombuffer(f.read(), np.uint8).reshape(dims)


def inputs(images):
    """The documented standard:M:S on bytes, (b/255 - M)/S, computed as dtrain does it in fp32:
    b x (1/(255 S)) + (-255 M/(255 S)), so both frameworks train on the same bits."""
    m = np.float32(MEAN) * np.float32(255)
    s = np.float32(STD) * np.float32(255)
    mul, add = np.float32(1) / s, -m / s
    x = images.astype(np.float32) * mul + add
    return torch.from_numpy(x.reshape(len(images), 1, 8, 8).astype(np.float32))


def build(spec):
    """nn.Sequential of a dtrain --model list on 1x8x8 inputs (the translation the DDP benchmark uses)."""
    return build_sequential(spec, (1, 8, 8))


def flat(model):
    return np.concatenate([p.detach().numpy().ravel() for p in model.parameters()]).astype("<f4")


def batch_indices(data_step, world, batch, n, drop_last=False):
    """--shuffle none: data step i of an epoch takes positions i x W x B ... of the file order, rank
    r the B at r x B among them, so the global batch is contiguous in rank order. Without
    --drop-last the epoch's last step is padded by wrapping to its first samples (ceil(N / (W x B))
    steps per epoch), as a DataLoader(drop_last=False) does not (it gives a short batch); with it,
    floor(N / (W x B)) steps, DataLoader(drop_last=True)'s batches."""
    g = world * batch
    per_epoch = n // g if drop_last else -(-n // g)
    i = data_step % per_epoch
    return [(i * g + j) % n for j in range(g)]


def torch_run(spec, x, y, init, make_opt, steps, world=1, batch=16, accum=1, drop_last=False, make_sched=None,
              clip=0.0, loader=None):
    """The PyTorch loop: per optimizer step, `accum` micro-batches of world x batch samples (data
    steps step x accum ..., running on across an epoch's end; or the next ones of loader, an
    iterator of (inputs, labels)), each loss divided by accum and backward()ed, then
    clip_grad_norm_, opt.step() and scheduler.step(). Returns the per-step mean losses, the lr each
    step used, the norms clip_grad_norm_ returned (before clipping) and the model."""
    model = build(spec)
    off = 0
    for p in model.parameters():
        p.data.copy_(torch.from_numpy(init[off:off + p.numel()].reshape(p.shape)))
        off += p.numel()
    opt = make_opt(model.parameters())
    sched = make_sched(opt) if make_sched else None
    lossf = torch.nn.CrossEntropyLoss()  # mean over the (global) batch, as dtrain's loss
    losses, lrs, norms = [], [], []
    for s in range(steps):
        opt.zero_grad()
        total = 0.0
        for j in range(accum):
            if loader is not None:
                xb, yb = next(loader)
            else:
                idx = batch_indices(s * accum + j, world, batch, len(x), drop_last)
                xb, yb = x[idx], y[idx]
            loss = lossf(model(xb), yb)
            (loss / accum).backward()
            total += loss.item()
        if clip:
            norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), clip)))
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        if sched:
            sched.step()
        losses.append(total / accum)
    return losses, lrs, norms, model


def dtrain_run(dtrain, mpirun, tmp, name, spec, init, flags, world=1, batch=16, steps=None):
    """dtrain train on tmp/idx with these flags (and --steps unless flags give --epochs); the
    metrics records (--log-every 1) and the --dump-params values."""
    d = os.path.join(tmp, name.replace(" ", "_"))
    os.makedirs(d)
    init.tofile(os.path.join(d, "init.bin"))
    cmd = [dtrain, "train", "--data", os.path.join(tmp, "idx"), "--model", spec, "--batch", str(batch),
           "--shuffle", "none", "--normalize", f"standard:{MEAN}:{STD}",
           "--init-params", os.path.join(d, "init.bin"), "--dump-params", os.path.join(d, "out.bin"),
           "--metrics", os.path.join(d, "m.jsonl"), "--log-every", "1", "--quiet"] + flags
    if steps is not None:
        cmd += ["--steps", str(steps)]
    if world > 1:
        cmd = [mpirun, "-np", str(world)] + cmd
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"{name}: exit {r.returncode}\n{' '.join(cmd)}\n{r.stdout}")
    with open(os.path.join(d, "m.jsonl")) as f:
        recs = [json.loads(line) for line in f]
    assert [r["step"] for r in recs] == list(range(1, len(recs) + 1)), f"{name}: metrics steps"
    return recs, np.fromfile(os.path.join(d, "out.bin"), "<f4")


def param_difference(model, d_params):
    """The largest difference over the largest |value| of the same tensor (so a weight that crosses
    zero is not judged by its own tiny size), and that tensor's name."""
    worst_rel, off, worst = 0.0, 0, ""
    for pname, p in model.named_parameters():
        t = p.detach().numpy().ravel()
        dd = d_params[off:off + t.size]
        off += t.size
        rel = float(np.max(np.abs(dd - t)) / np.max(np.abs(t)))
        if rel > worst_rel:
            worst_rel, worst = rel, pname
    return worst_rel, worst
