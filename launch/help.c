/*
 * help.c - the help screens and the `dtrain help` command: the overview (the commands and the
 * options they all take) and one screen per command and benchmark (`dtrain help train`, `dtrain
 * train --help`, `dtrain help bench gemm`, `dtrain bench gemm --help`), each short enough for a
 * terminal of 24 x 80.
 *
 * Defaults shown here are the code's (train_flags_parse in train_flags.c, dt_*_defaults in the library);
 * tests/mpi/test_cli.sh checks that every screen fits and names each flag its command takes.
 */
#include "launch/cli.h"

#include <stdio.h>
#include <string.h>

static const char overview[] = "usage: dtrain <command> [options]      dtrain help <command>: its options\n"
                               "commands:\n"
                               "  train            data-parallel training on a dataset or synthetic data\n"
                               "  eval             a checkpoint's accuracy and confusion matrix on a dataset\n"
                               "  plot | model-perf  metrics against step (PNG) | predicted step and scaling\n"
                               "  bench allreduce  the engine's allreduce against MPI_Allreduce, per size\n"
                               "  bench gemm       TFLOP/s of matrix products on the CPU and the GPU\n"
                               "  bench step|data  samples/s of training steps; of the input pipeline\n"
                               "  bench reducer    per-layer ready() in a user's loop against one allreduce\n"
                               "  data info|convert|verify   a dataset's stats; it as .dts shards; read whole\n"
                               "  env | doctor     every rank's placement | its set-up checked, with the fixes\n"
                               "  version          versions of dtrain and of what it was built with\n"
                               "  help [COMMAND]   this text, or a command's options (help train data, ...)\n"
                               "options of every command (flag > DTRAIN_* variable > default):\n"
                               "  --device auto|cpu|cuda  DTRAIN_DEVICE        auto: CUDA if a GPU is visible\n"
                               "  --pin auto|none         DTRAIN_PIN           auto: split cores per local rank\n"
                               "  --timeout SECONDS       DTRAIN_TIMEOUT       300 (0 = none): a collective\n"
                               "                                               older than this aborts the job\n"
                               "  --blas-threads N        DTRAIN_BLAS_THREADS  0: one per pinned core\n"
                               "  --gpu-comm nccl|mpi     DTRAIN_GPU_COMM      nccl; mpi: through host memory\n"
                               "                                               (ranks may then share a GPU)\n"
                               "Launch with srun --mpi=pmix, mpirun, or nothing (a world of 1).\n"
                               "Exit codes: 0 success, 1 run-time failure, 2 bad usage, 75 stopped on a signal\n"
                               "after a checkpoint (--resume auto); 143 nothing saved; 130/129 on SIGINT/SIGHUP.\n";

static const char common_line[] = "options of every command (--device, --pin, --timeout, ...): dtrain help\n";

static const char train[] = "usage: dtrain train [options]   data-parallel training (dtrain help train data:\n"
                            "                                the data flags; help train precision: fp16/bf16)\n"
                            "model and steps\n"
                            "  --model mlp|cnn|LAYERS (mlp)  LAYERS: fc:OUT,conv:OUT:K:STRIDE:PAD,pool:K,\n"
                            "                                relu,flatten; the last is fc:CLASSES\n"
                            "  --input N|CxHxW (the data's, or the model's)  --seed N (1)  --batch B (64)\n"
                            "  --steps N (100) or --epochs N  --init-params FILE (--dump-params' layout)\n"
                            "optimizer and gradients\n"
                            "  --optim sgd|adamw (sgd)  --lr F (0.01)  --momentum F (0.9; PyTorch's is 0)\n"
                            "  --weight-decay F (0)  --beta1 F (0.9)  --beta2 F (0.999)  --eps F (1e-8)\n"
                            "  --lr-schedule constant|cosine|linear|step:M1,M2,..:GAMMA (constant; Me =\n"
                            "     epoch M)  --warmup-steps N (0)  --min-lr F (0: the floor after warmup)\n"
                            "  --graphs auto|1|0  --accum-steps K (1)  --clip-grad-norm F|inf (0: off)\n"
                            "  --step-overlap auto|1|0  --bucket-mb F|auto (25)  --first-bucket-mb F (1)\n"
                            "  --no-overlap  --grad-comm fp32|fp16|bf16 (fp32; 16-bit: its own)  --zero 0|1\n"
                            "output and checkpoints\n"
                            "  --log-every N (10; and each checkpoint step)  --metrics FILE.jsonl (kept on\n"
                            "     resume)  --quiet (warnings, errors, summary)  --progress auto|always|never\n"
                            "  --straggler-threshold F (1.2)  --trace FILE.json (ui.perfetto.dev timeline)\n"
                            "  --trace-steps A:B (all)  (resumed: FILE.json kept, FILE.resumed-STEP.json)\n"
                            "  --dump-params FILE  --checkpoint-dir DIR  --checkpoint-every N (0)\n"
                            "  --keep-checkpoints N (0: all)  --resume auto|never (never)  on SIGUSR1, TERM,\n"
                            "  INT, HUP: stop after a step, save; exit 75 (no dir: 143), INT 130, HUP 129\n";

static const char train_data[] = "usage: dtrain train --data PATH [options]   (the other flags: dtrain help train)\n"
                                 "  --data PATH            MNIST IDX dir, CIFAR-10/100 dir or file, image folder\n"
                                 "                         (ROOT/<class>/*.jpg|png), .dts; none: synthetic data\n"
                                 "  --data-format auto|idx|cifar10|cifar100|imagefolder|dts (auto)\n"
                                 "  --cifar100-labels fine|coarse (fine)  --dataset-size N (synthetic: 60000)\n"
                                 "  --normalize none|unit|standard[:M,..:S,..] (standard; synthetic: none)\n"
                                 "                         unit: bytes/255; standard: per-channel mean/std of\n"
                                 "                         the training split, or those given (bytes: /255 units)\n"
                                 "  --eval-data PATH       held-out data (default: the test split, if any)\n"
                                 "  --holdout F            else keep this fraction of the training set aside\n"
                                 "  --eval-every N (0)     held-out loss/accuracy every N steps; always at the end\n"
                                 "  --shuffle epoch|none (epoch)  --drop-last (drop the last partial step)\n"
                                 "  --augment crop:P,flip  random crop after P pixels of zero padding, h-flip\n"
                                 "  --bad-samples fail|skip (fail)   undecodable images: stop, or replace+count\n"
                                 "  --loader-threads N|auto (auto)   threads that read/decode/augment ahead\n"
                                 "  --synthetic-on auto|host|device  synthetic batches made by a GPU kernel\n"
                                 "                         (auto: on a GPU without --augment) or on the host\n"
                                 "Each epoch is a permutation from (seed, epoch); step s takes the next W x B\n"
                                 "samples and rank r the B at r x B among them. The position is saved in\n"
                                 "checkpoints: resuming on other ranks goes on mid-epoch. dtrain eval: test it.\n";

static const char train_precision[] =
    "usage: dtrain train --precision fp16|bf16 [options]  (others: dtrain help train)\n"
    "fp16 scales the loss dynamically unless told otherwise. Parameter gradients are\n"
    "16-bit on the CPU (--grad-comm fp32 keeps them fp32), fp32 on a GPU.\n"
    "  --precision fp32|fp16|bf16 (fp32)  --loss-scale dynamic|none|F\n"
    "  --loss-scale-init F (65536)  --loss-scale-growth F (2)\n"
    "  --loss-scale-backoff F (0.5)  --loss-scale-interval N (2000)\n"
    "  --loss-scale-hysteresis N (1)  --max-overflow-fraction F (0.5)\n"
    "  --loss-scale-min F (1)  --loss-scale-max F (2^24)  --loss-scale-window N (100)\n"
    "The scale moves as torch.amp.GradScaler's (init, growth, backoff, interval);\n"
    "dtrain adds the hysteresis (1 as PyTorch), the bounds and the stops (window).\n"
    "  --fused-relu 1|0 (1)  relu layers run inside their neighbours; 0 keeps them\n"
    "     kernels of their own, for a NaN to reach the loss (a GPU's fused 16-bit fc\n"
    "     ReLU may make it 0)\n";

static const char eval[] = "usage: dtrain eval --checkpoint-dir DIR --data PATH [options]\n"
                           "A trained model's accuracy, mean loss, per-class accuracy and confusion matrix,\n"
                           "sharded over the ranks (the figures do not depend on how many), with the\n"
                           "normalization training used (kept in the checkpoint). Over 20 classes: the\n"
                           "mean of the classes' accuracies, the 10 lowest and the 10 largest confusions.\n"
                           "\n"
                           "  --model M --input CxHxW   as for training (the checkpoint refuses another)\n"
                           "  --split test|train (test)  --holdout F   the share training kept aside;\n"
                           "     another F is refused (the checkpoint's run record names the one to use)\n"
                           "  --eval-data PATH   all of PATH, as training's --eval-data: an image folder's\n"
                           "     classes numbered by --data's (give training's --data)\n"
                           "  --data-format F  --cifar100-labels fine|coarse   as for dtrain train\n"
                           "  --batch N (256)  --loader-threads N|auto (auto)\n"
                           "  --bad-samples fail|skip (fail)   undecodable images: stop, or leave out\n"
                           "  --confusion-csv FILE      the matrix as CSV (printed up to 20 classes)\n";

static const char plot[] = "usage: dtrain plot METRICS.jsonl [-o OUT.png|-]\n"
                           "The records of dtrain train --metrics against the step, one panel each: loss\n"
                           "(and eval loss), accuracy (and eval accuracy), learning rate, samples/s, and\n"
                           "the loss scale of an fp16/bf16 run; drawn by gnuplot (apt-get install\n"
                           "gnuplot-nox). A malformed line is refused with its number; a last line cut\n"
                           "short (a killed run, a full disk) is left out with a warning. Over 8000\n"
                           "records, each series' first, last, lowest and highest in each of 2000 step\n"
                           "ranges are drawn: the same curves, fast. The curves break where the steps\n"
                           "skip over 3 logging intervals (records a resume or a full disk lost).\n"
                           "\n"
                           "  -o, --output OUT.png   (METRICS with .jsonl replaced by .png); written to a\n"
                           "                         temporary name, then renamed over OUT. -o - writes the\n"
                           "                         PNG to stdout (> file.png; never to a terminal)\n";

static const char model_perf[] = "usage: dtrain model-perf (--profile F[:MS] | --synthetic S | --spec S)... [opts]\n"
                                 "The step-time model: per-layer backward, the reducer's buckets, NCCL's ring and\n"
                                 "tree allreduce within and between nodes, each bucket's allreduce once backward\n"
                                 "filled it and the link is free. Per scale: the predicted step, exposed comm,\n"
                                 "efficiency against one rank, the best bucket cap. docs/model-perf.md.\n"
                                 "  --profile FILE[:MS]   dtrain bench step --profile N output, one precision;\n"
                                 "                        :MS rescales its compute to MS a step (another device's)\n"
                                 "  --synthetic N:P:L:MS  model N, P million parameters in L equal layers, MS of\n"
                                 "                        compute a step (1/3 forward, 2/3 backward)\n"
                                 "  --spec SPEC           a model of the grammar: fc and conv FLOPs x --batch B\n"
                                 "                        (32) / --tflops R (100) a layer\n"
                                 "  --input SHAPE  --name N   for the models after them: the input of a --spec or\n"
                                 "                        an older --profile's non-preset model; the next's label\n"
                                 "  --allreduce FILE      a ring fitted to dtrain bench allreduce output: the link\n"
                                 "                        at both levels (the flags below override it)\n"
                                 "  --alpha-us A  --busbw-gbs B    within a node (1 us, 370 GB/s: NVLink, H200)\n"
                                 "  --net-alpha-us A  --net-gbs B  between nodes, a node's NICs together (5 us,\n"
                                 "                        200 GB/s: 4 x 400 Gb/s InfiniBand)\n"
                                 "  --call-us C           the fixed cost of every allreduce (10; --allreduce: 0)\n"
                                 "  --gpus-per-node G (8)  --world W or --scales LIST (8,16,...,4096)\n"
                                 "  --bucket-mb F (25)  --first-bucket-mb F (1)  --no-overlap  --plot FILE.png\n"
                                 "  --wire fp32|fp16|bf16  --algo ring|tree|auto (auto: the faster per bucket)\n"
                                 "A profile taken at the --world predicted adds the measured step and the error.\n"
                                 "--engine-curve SIZES: the engine's own allreduce (help model-perf engine-curve)\n";

static const char model_perf_curve[] =
    "usage: dtrain model-perf --engine-curve SIZES [opts]\n"
    "No model: the engine's fp32 host allreduce between MPI ranks, modelled per size\n"
    "and scale: busbw of MPI's ring, the direct reduce-scatter + allgather, the\n"
    "pipelined chain, and the algorithm the engine picks with its busbw against the\n"
    "ring's (docs/performance.md, \"The engine's algorithms at scale\").\n"
    "  --engine-curve SIZES  bucket sizes, K/M/G suffixes (powers of 1024), up to 8:\n"
    "                        1M,16M,64M\n"
    "  --scales LIST (2,4,...,512)  or --world W\n"
    "  --gpus-per-node G     ranks a node (8)\n"
    "  --net-gbs B  --net-alpha-us A  a node's link each way, a hop between nodes\n"
    "                        (12.5 GB/s, 10 us: 100 Gb/s Ethernet)\n"
    "  --busbw-gbs B  --alpha-us A    a rank's shared memory, a message within a node\n"
    "                        (10 GB/s, 1 us)\n"
    "  --msg-us M            the host's work for one message (1)\n"
    "  --segment-bytes N     the chain's segment (64000, the engine's; K/M/G)\n"
    "  --plot FILE.png       busbw against ranks, a panel per size\n";

static const char bench[] = "usage: dtrain bench allreduce|gemm|step|data|reducer [options]\n"
                            "\n"
                            "benchmarks (dtrain help bench <benchmark>: its options):\n"
                            "  allreduce  bandwidth of the engine's allreduce against MPI_Allreduce, per size\n"
                            "  gemm       TFLOP/s of n x n matrix products on the CPU and the GPU\n"
                            "  step       samples/s of training steps per precision, side by side\n"
                            "  data       samples/s of the input pipeline per loader thread count\n"
                            "  reducer    a user loop's per-layer ready() against one blocking allreduce\n";

static const char bench_reducer[] = "usage: dtrain bench reducer [options]\n"
                                    "A user's own loop (L fc layers of width W, batch B per rank, fp32 host buffers,\n"
                                    "dt_sgemm) in five variants, interleaved in one run, the median step of each:\n"
                                    "A the reducer, ready() per layer as backward goes; B one blocking allreduce\n"
                                    "after backward; C compute only; D the allreduce alone; E A without overlap.\n"
                                    "Prints A/B, the communication share D/B (a warning below 1/3), the fraction\n"
                                    "hidden (B-A)/D, and A/E: overlap alone. Exits 1 unless A's and E's last\n"
                                    "gradients are equal bit for bit and B's within 1e-5 of the largest (bit for\n"
                                    "bit where MPI adds in rank order: up to 3 ranks on one node).\n"
                                    "\n"
                                    "  --layers L              fc layers (6)\n"
                                    "  --width W               their width (1024)\n"
                                    "  --batch B               per rank (16)\n"
                                    "  --steps N               timed rounds, one step of each variant (20)\n"
                                    "  --warmup N              untimed rounds before them (3)\n"
                                    "  --bucket-mb F           A's and E's bucket cap in MiB (the reducer's, 25)\n"
                                    "  --first-bucket-mb F     their first bucket's cap (1)\n"
                                    "  --wire fp32|fp16|bf16   what travels (fp32); 16-bit: B and D use a one-bucket\n"
                                    "                          reducer, since dt_allreduce has no 16-bit wire\n";

static const char bench_data[] = "usage: dtrain bench data --data PATH|synthetic [options]\n"
                                 "Samples/s of the input pipeline alone: read, decode, augment and normalize into\n"
                                 "the loader's batches, per loader thread count, side by side (one process);\n"
                                 "the first count runs once untimed first, so the ratio's base is not slowed by\n"
                                 "the process's first use of the batch memory.\n"
                                 "\n"
                                 "  --data PATH  --data-format F  --input CxHxW (image folders: the decode size)\n"
                                 "  --data synthetic         dtrain train's built-in data, made not read (--input,\n"
                                 "                           3x32x32; 60000 samples, normalize none)\n"
                                 "  --threads LIST (1,2)    loader thread counts (0: the caller's thread)\n"
                                 "  --batch N (256)  --batches N (20)  --warmup N (2)\n"
                                 "  --augment none|flip|crop:P|crop:P,flip (none)\n"
                                 "  --normalize none|unit|standard[:M,..:S,..] (standard; figures given as\n"
                                 "                           dtrain train takes them: no pass over the data)\n"
                                 "bench/data_compare.py runs it against torchvision's ImageFolder + DataLoader.\n";

static const char bench_allreduce[] =
    "usage: dtrain bench allreduce [options]\n"
    "Bandwidth of the engine's allreduce of fp32 host buffers against MPI_Allreduce,\n"
    "per size, nccl-tests style; exits 1 when a result is wrong.\n"
    "\n"
    "  -b, --minbytes N         the smallest size (8)\n"
    "  -e, --maxbytes N         the largest size (64M)\n"
    "  -f, --stepfactor N       each size is the last times N (2)\n"
    "  --iters N                timed iterations per size (20)\n"
    "  --warmup N               untimed iterations before them (5)\n"
    "  --op sum|avg             (sum)\n"
    "  --dtype fp32|fp16|bf16   what the engine sends: fp32, or 16-bit copies (fp32)\n"
    "Sizes take K, M, G suffixes (powers of 1024), up to 4G.\n";

static const char bench_gemm[] = "usage: dtrain bench gemm [options]\n"
                                 "TFLOP/s of n x n matrix products on the CPU (OpenBLAS, this rank's cores) and\n"
                                 "the GPU (cuBLAS), and the GPU/CPU ratio; exits 1 when a checked result is wrong\n"
                                 "or a CUDA/cuBLAS call fails (a '# GPU' line under a row says why it is empty).\n"
                                 "\n"
                                 "  --n N,N,...          sizes (4096,8192,10000)\n"
                                 "  --dtype T,T,...      of fp32,tf32,bf16,fp16 (all); the CPU runs fp32 only\n"
                                 "  --iters N            timed repetitions at most (20)\n"
                                 "  --warmup N           untimed ones before them (1)\n"
                                 "  --max-seconds F      repeat a product for about F seconds at most (3)\n"
                                 "  --no-cpu, --no-gpu   leave a side out (not both)\n"
                                 "Rows: mean ms, reps timed, the CPU's fastest-slowest product. The largest --n\n"
                                 "must fit this rank's host memory (else refused, naming the n that fits).\n"
                                 "Under mpirun every rank runs each product, started together; a row is the\n"
                                 "slowest rank's.\n";

static const char bench_step[] = "usage: dtrain bench step [options]\n"
                                 "Samples/s of whole training steps of one model in each precision, side by side,\n"
                                 "on the device the placement chose (or --device).\n"
                                 "\n"
                                 "  --model M                as in dtrain train (mlp)\n"
                                 "  --input N|CxHxW          (the model's)\n"
                                 "  --batch B                per rank (128)\n"
                                 "  --precision P,P,...      of fp32,fp16,bf16 (fp32,bf16,fp16), ratios to 1st\n"
                                 "  --steps N, --warmup N    timed steps (50), untimed steps before them (5)\n"
                                 "  --loader-threads N|auto  (auto: 0 on the CPU, cores-1 up to 32 on a GPU)\n"
                                 "  --profile N              then N profiled steps: time per phase and per layer\n"
                                 "  --zero 0|1|0,1           optimizer state replicated (0), sharded (1, ZeRO-1),\n"
                                 "                           or both side by side (0)\n"
                                 "  --optim sgd|adamw        (sgd, momentum 0.9)\n"
                                 "  --clip-grad-norm X|inf   clip the gradient norm at X as dtrain train (0: off)\n"
                                 "  --step-overlap L         of auto,1,0 (auto): the optimizer step layer by layer\n"
                                 "                           beside backward, as dtrain train; a list runs each\n"
                                 "  --graphs L               of auto,1,0 (auto: under 8M parameters): on a GPU,\n"
                                 "                           forward and backward as one graph; a list runs each\n"
                                 "  --synthetic-on L         of auto,host,device (auto: device on a GPU): where\n"
                                 "                           the batches are made; a list runs each\n"
                                 "  --defer-verdict 1|0      fp16: next step queued before the last's verdict (1)\n"
                                 "  --fused-relu 1|0         relu layers run inside their neighbours (1)\n";

static const char data[] = "usage: dtrain data info PATH [options]\n"
                           "       dtrain data convert SRC DST [options]\n"
                           "       dtrain data verify PATH [options]\n"
                           "\n"
                           "commands:\n"
                           "  info      what a dataset holds (dtrain help data info: its options)\n"
                           "  convert   writes a dataset as .dts shards (dtrain help data convert)\n"
                           "  verify    reads a dataset whole and checks it (dtrain help data verify)\n";

static const char data_info[] = "usage: dtrain data info PATH [options]\n"
                                "What the dataset at PATH holds, per split (train, test): its format, samples,\n"
                                "shape, classes and the samples of each, the value range, and the mean and\n"
                                "standard deviation of each channel. Every file is checked whole. A test split\n"
                                "whose files are there but do not open is an error (exit 1); none is said.\n"
                                "PATH: an MNIST-style IDX directory (train-images-idx3-ubyte, t10k-..., each\n"
                                "optionally .gz), a CIFAR-10 (data_batch_1..5.bin, test_batch.bin) or CIFAR-100\n"
                                "(train.bin, test.bin) directory, a directory of .dts shards (train.dts,\n"
                                "test.dts), an image folder (ROOT/<class>/*.jpg|png, or ROOT/train + ROOT/val;\n"
                                "valid/, validation/ or test/ beside train/ is taken for val/).\n"
                                "\n"
                                "  --data-format auto|idx|cifar10|cifar100|imagefolder|dts  (auto: detected)\n"
                                "  --input CxHxW                             image folders: the decode size\n"
                                "  --cifar100-labels fine|coarse             CIFAR-100's 100 or 20 classes (fine)\n"
                                "  --threads N                               reading threads (cores, up to 8)\n";

static const char data_convert[] = "usage: dtrain data convert SRC DST [options]\n"
                                   "Writes the dataset at SRC (any format dtrain reads) as .dts shards: one file per\n"
                                   "split, read later by mmap without copying, with the per-channel mean/std in its\n"
                                   "header (docs/dts-format.md). DST ending in .dts is one file holding one split\n"
                                   "(--split train|test, default train); any other DST is a directory (made if\n"
                                   "missing) that receives train.dts and, when SRC has a test split, test.dts\n"
                                   "(a test split that does not open fails it, before anything is written).\n"
                                   "Images are decoded and resized once, here. An existing DST file is kept unless\n"
                                   "--force; a failed write leaves no file behind, and a directory gets every split\n"
                                   "or none.\n"
                                   "\n"
                                   "  --split train|test|all        which split(s) (all for a directory DST)\n"
                                   "  --dtype uint8|fp16|fp32       stored values (uint8 for bytes, else fp32)\n"
                                   "  --input CxHxW                 image folders: the size images are made\n"
                                   "  --data-format F  --cifar100-labels fine|coarse   as for dtrain data info\n"
                                   "  --threads N                   reading threads (cores, up to 8)\n"
                                   "  --force                       replace existing .dts files\n";

static const char data_verify[] = "usage: dtrain data verify PATH [options]\n"
                                  "Reads every sample and label of the dataset at PATH (any format), both splits:\n"
                                  "every label must be below the class count, every value finite, every image\n"
                                  "decodable; a .dts file's payload CRC-32 is checked too. It goes on past a bad\n"
                                  "sample and names each, in index order (the same list whatever --threads):\n"
                                  "    sample 6 (ROOT/cat/002.png): ROOT/cat/002.png cannot be decoded as PNG: ...\n"
                                  "with the image's path (image folders) or the byte offset (.dts), then how many\n"
                                  "of how many samples are bad per split, and exits 1; OK and exit 0 when none.\n"
                                  "A test split whose files are there but do not open fails it too, named after\n"
                                  "the train split's report; a dataset without one says 'test: none'.\n"
                                  "\n"
                                  "  --max-errors N    name at most N bad samples per split (20; 0: every one);\n"
                                  "                    every sample is still read and counted\n"
                                  "  --data-format F  --cifar100-labels fine|coarse  --threads N  --input CxHxW\n"
                                  "                    as for data info\n";

static const char env[] = "usage: dtrain env [options]\n"
                          "Every rank's placement, gathered by rank 0: rank/world, local rank/size, node,\n"
                          "host, launcher, device, the GPU it takes, CPU cores and who bound them, BLAS\n"
                          "threads, and the MPI/NCCL/CUDA versions. Start it as you start training:\n"
                          "  srun --mpi=pmix build/dtrain env     mpirun -np 8 build/dtrain env\n";

static const char doctor[] = "usage: dtrain doctor [--json] [--no-comm] [--model M [--input S] [--precision P]\n"
                             "                     [--batch N]] [options]\n"
                             "Checks the job's set-up on every rank and prints one table on rank 0: CHECK,\n"
                             "STATUS (PASS, SKIP, WARN, FAIL), the ranks, what was seen, and the fix.\n"
                             "Launcher and MPI (PMIx, srun without --mpi=pmix, CUDA-aware MPI, busy-polling),\n"
                             "CPU (cores, overlaps, OpenBLAS kernels and threads, cgroup quota), the node\n"
                             "(/dev/shm, ulimits), communication (timed 1 MiB and 64 MiB allreduces, the\n"
                             "slowest node), CUDA and memory.\n"
                             "  --json           one JSON object instead of the table (docs/doctor.md)\n"
                             "  --no-comm        skip the timed allreduces\n"
                             "  --model M [--input S] [--precision fp32|fp16|bf16] [--batch N]\n"
                             "                   the largest batch of model M that fits on each device\n"
                             "                   (--input: the shape of one sample; a preset brings its own)\n"
                             "  --checkpoint-dir D [--keep-checkpoints N]  --data P  --metrics F\n"
                             "                   paths train will use: writable, unlocked, free space, format\n"
                             "Exit 0 when nothing FAILs (warnings included), 1 on a FAIL, 2 bad usage.\n"
                             "Start it as you start training; it also runs where training would be refused:\n"
                             "  srun --mpi=pmix build/dtrain doctor   mpirun -np 8 build/dtrain doctor --json\n";

static const char version[] = "usage: dtrain version\n"
                              "Versions of dtrain and of what it was built with: MPI (and whether it is\n"
                              "CUDA-aware), NCCL, CUDA.\n";

static const struct {
    const char *topic, *text;
    int common; /* ends with the line that points at the options of every command */
} screens[] = {
    {"train", train, 1},
    {"train data", train_data, 0},
    {"train precision", train_precision, 0},
    {"eval", eval, 1},
    {"plot", plot, 0},
    {"model-perf", model_perf, 0},
    {"model-perf engine-curve", model_perf_curve, 0},
    {"bench", bench, 1},
    {"bench allreduce", bench_allreduce, 1},
    {"bench gemm", bench_gemm, 1},
    {"bench step", bench_step, 1},
    {"bench data", bench_data, 1},
    {"bench reducer", bench_reducer, 1},
    {"env", env, 1},
    {"doctor", doctor, 1},
    {"version", version, 1},
    {"help", overview, 0},
    {"data", data, 0},
    {"data info", data_info, 0},
    {"data convert", data_convert, 0},
    {"data verify", data_verify, 0},
};

void cli_usage(FILE *f) { fputs(overview, f); }

int cli_help(const char *topic, FILE *f)
{
    for (size_t i = 0; i < sizeof screens / sizeof *screens; i++) {
        if (strcmp(topic, screens[i].topic) != 0) continue;
        if (!f) return 0;
        fputs(screens[i].text, f);
        if (screens[i].common) fputs(common_line, f);
        return 0;
    }
    return -1;
}

/* `dtrain help [COMMAND [BENCHMARK]]`: the overview, or one command's screen, on stdout. */
int cmd_help(int argc, char **argv)
{
    if (argc < 2) {
        cli_usage(stdout);
        return EXIT_OK;
    }
    char topic[128] = "";
    for (int i = 1; i < argc; i++) {
        size_t used = strlen(topic);
        snprintf(topic + used, sizeof topic - used, "%s%s", i > 1 ? " " : "", argv[i]);
    }
    if (cli_help(topic, stdout) == 0) return EXIT_OK;
    if (!strcmp(argv[1], "bench"))
        cli_error("no help for '%s': the benchmarks are allreduce, gemm, step, data, reducer (dtrain help bench gemm)",
                  topic);
    else
        cli_error(
            "no help for '%s': the commands are train, eval, bench, data, env, doctor, plot, model-perf, version, help",
            topic);
    return EXIT_USAGE;
}
