#!/usr/bin/env bash
# predict.sh [OUT.txt] [OUT.png] - the step-time model's predictions (docs/model-perf.md): scaling
# efficiency from 8 to 4096 GPUs on H100/H200-class nodes and the best bucket cap at each scale,
# plotted; then the model on the hardware of two published results (Horovod's 512 P100s on 25 GbE,
# PyTorch DDP's 256 V100s). Every figure is a flag below.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dtrain=${DTRAIN:-$here/../../build/dtrain}
out=${1:-$here/predictions.txt}
png=${2:-$(cd "$here/../.." && pwd)/docs/img/perfmodel-scaling.png}
# VGG-16 in the model grammar (13 conv, 3 fc: 138 M parameters), input 3x224x224.
c() { printf 'conv:%s:3:1:1,relu,' "$@"; }
vgg16="$(c 64 64)pool:2,$(c 128 128)pool:2,$(c 256 256 256)pool:2,$(c 512 512 512)pool:2,$(c 512 512 512)pool:2"
vgg16="${vgg16},flatten,fc:4096,relu,fc:4096,relu,fc:1000"
{
    echo "## H200-class nodes: 8 GPUs a node, NVLink busbw 370 GB/s, 4 x 400 Gb/s InfiniBand (200 GB/s) a node"
    # mlp and cnn: the per-layer split of this machine's CPU profile, rescaled to the H200's measured
    # fp32 step (bench/GPU-NOTES.md: mlp batch 256 1,069,839 samples/s = 0.239 ms; cnn 1x28x28
    # batch 1024 279,345 samples/s = 3.666 ms). ResNets: uniform synthetic models (parameter tensors
    # as layers) at 3 x forward FLOPs (2 x 4.1 G and 2 x 7.8 G multiply-adds an image) x batch 256
    # / an effective 100 TFLOP/s (1/8 of the 798 TFLOP/s bf16 GEMM ceiling: an assumption, about
    # 4,000 ResNet-50 images/s a GPU); VGG-16 from the grammar at the same rate, batch 64.
    "$dtrain" model-perf --profile "$here/data/step-mlp-cpu.txt:0.239" --profile "$here/data/step-cnn-cpu.txt:3.666" \
        --synthetic resnet50:25.6:161:63.0 --synthetic resnet101:44.5:314:119.8 \
        --name vgg16 --input 3x224x224 --batch 64 --tflops 100 --spec "$vgg16" --plot "$png" | grep -v '^model-perf: wrote' 
    echo
    echo "## The same with --no-overlap (every allreduce after backward)"
    "$dtrain" model-perf --synthetic resnet50:25.6:161:63.0 --synthetic resnet101:44.5:314:119.8 \
        --name vgg16 --input 3x224x224 --batch 64 --tflops 100 --spec "$vgg16" --no-overlap
    echo
    echo "## Horovod (README/docs/benchmarks.rst): 128 servers x 4 Pascal GPUs, RoCE 25 Gbit/s; 90% ResNet-101, 68% VGG-16"
    # P100 over PCIe within a server (10 GB/s busbw, 5 us), one 25 Gb/s NIC a server (2.9 GB/s after
    # headers, 10 us); fp32 gradients; Horovod's tensor fusion buffer (64 MiB, no small first one).
    # ResNet-101 batch 64 at 115 images/s a GPU (the docs' 16-GPU run: 1656.8 images/s = 103.6 a GPU);
    # VGG-16 batch 64 at ~125 images/s a GPU: an effective 11.7 TFLOP/s over the 31 GFLOP an image
    # the grammar counts (Winograd convolutions do fewer), an assumption of P100 throughput.
    for ov in "" --no-overlap; do
        "$dtrain" model-perf --synthetic resnet101:44.5:314:556 --name vgg16 --input 3x224x224 --batch 64 \
            --tflops 11.7 --spec "$vgg16" --gpus-per-node 4 --alpha-us 5 --busbw-gbs 10 --net-alpha-us 10 --net-gbs 2.9 \
            --bucket-mb 64 --first-bucket-mb 64 --scales 4,16,64,128,256,512 $ov
    done
    echo
    echo "## PyTorch DDP (Li et al., VLDB 2020): 32 servers x 8 V100 (NVLink), near-linear to 256 GPUs"
    # V100 NVLink (DGX-1 class, ~130 GB/s busbw, 2 us), 100 Gb/s between servers (11.5 GB/s, 10 us);
    # ResNet-50 batch 32 at ~380 images/s a GPU (84 ms); DDP's 25 MiB buckets, 1 MiB first.
    for ov in "" --no-overlap; do
        "$dtrain" model-perf --synthetic resnet50:25.6:161:84 --gpus-per-node 8 --alpha-us 2 --busbw-gbs 130 \
            --net-alpha-us 10 --net-gbs 11.5 --scales 8,16,32,64,128,256 $ov
    done
} >"$out"
echo "predict.sh: wrote $out and $png"
