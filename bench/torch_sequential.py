"""dtrain's --model layer list as a PyTorch nn.Sequential: the one translation that the benchmark
against PyTorch DDP (bench/ddp_compare.py) and the numerics test (tests/mpi/test_torch_parity.py)
both use, so that the two always compare dtrain with the same PyTorch network.

The grammar is docs/training.md's: fc:N, relu, conv:OUT:K:STRIDE:PAD, pool:K (max pooling, window
and stride K) and flatten; a flatten is implied before the first fc of an image input. Parameters
come out in dtrain's --dump-params order (each layer's weight then bias, layer by layer), which is
nn.Sequential's parameters() order for these layers."""


def parse_input(text):
    """'784' or '1x28x28' -> (784,) or (1, 28, 28); ValueError naming the text otherwise."""
    try:
        dims = tuple(int(x) for x in text.split("x"))
    except ValueError:
        raise ValueError(f"bad input shape '{text}': expected N or CxHxW, e.g. 784 or 1x28x28")
    if not dims or any(d <= 0 for d in dims):
        raise ValueError(f"bad input shape '{text}': every dimension must be positive")
    return dims


def build_sequential(layers, input_shape):
    """nn.Sequential of the comma-separated layer list on per-sample inputs of input_shape
    ((N,) or (C, H, W)); ValueError naming an unknown layer or one the shape cannot take."""
    import torch.nn as nn

    mods = []
    shape = tuple(input_shape)

    def flatten():
        nonlocal shape
        n = 1
        for d in shape:
            n *= d
        mods.append(nn.Flatten())
        shape = (n,)

    for tok in layers.split(","):
        f = tok.strip().split(":")
        kind = f[0]
        try:
            args = [int(x) for x in f[1:]]
        except ValueError:
            raise ValueError(f"layer '{tok}': its arguments must be integers")
        if kind == "fc" and len(args) == 1:
            if len(shape) != 1:
                flatten()
            mods.append(nn.Linear(shape[0], args[0]))
            shape = (args[0],)
        elif kind == "relu" and not args:
            mods.append(nn.ReLU())
        elif kind in ("conv", "pool") and len(shape) != 3:
            raise ValueError(f"layer '{tok}' needs a CxHxW input, it gets {shape}")
        elif kind == "conv" and len(args) == 4:
            out, k, stride, pad = args
            c, h, w = shape
            mods.append(nn.Conv2d(c, out, k, stride=stride, padding=pad))
            shape = (out, (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1)
        elif kind == "pool" and len(args) == 1:
            k = args[0]
            c, h, w = shape
            mods.append(nn.MaxPool2d(k, stride=k))
            shape = (c, h // k, w // k)
        elif kind == "flatten" and not args:
            flatten()
        else:
            raise ValueError(f"unknown layer '{tok}' (fc:N, relu, conv:OUT:K:STRIDE:PAD, pool:K, flatten)")
    return nn.Sequential(*mods)
