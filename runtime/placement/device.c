/*
 * device.c - device selection: CPU or a CUDA GPU from the local rank, see device.h.
 */
#include "runtime/placement/device.h"
#include "base/hash.h"
#include "base/status.h"
#include "kernels/device_info.h"

#include <stdio.h>
#include <string.h>

/* The build's own counter (kernels/device_info.h) unless a test has put its own in. */
static device_count_fn count_fn = device_info_count;

void device_set_count_fn(device_count_fn fn) { count_fn = fn ? fn : device_info_count; }

int device_count(char *why, size_t n)
{
    if (n) why[0] = '\0';
    return count_fn(why, n);
}

dt_status device_map(int visible, int local_rank, int local_size, int share, int *ordinal)
{
    if (visible <= 0) return status_set_error(DT_ERR_DEVICE, "no GPU is visible to this process");
    if (local_rank < 0) return status_set_error(DT_ERR_INTERNAL, "device_map called with an unknown local rank");
    if (visible == 1) {
        /* srun --gpus-per-task / --gpu-bind give each task exactly its own GPU. That no two local
         * ranks see the same one is checked after MPI_Init (device_check_unique). */
        *ordinal = 0;
        return DT_OK;
    }
    if (share) {
        *ordinal = local_rank % visible;
        return DT_OK;
    }
    int ranks = local_size > 0 ? local_size : local_rank + 1;
    if (ranks > visible || local_rank >= visible)
        return status_set_error(DT_ERR_DEVICE,
                                "%d ranks on this node but only %d GPUs are visible (local rank %d): two "
                                "ranks would share one GPU, which NCCL does not support and can hang. Fix: "
                                "start at most %d ranks per node (srun --ntasks-per-node=%d, mpirun "
                                "--map-by ppr:%d:node), make more GPUs visible (CUDA_VISIBLE_DEVICES, "
                                "srun --gres=gpu:N), share GPUs with --gpu-comm mpi (slower), or train on "
                                "the CPU with --device cpu",
                                ranks, visible, local_rank, visible, visible, visible);
    *ordinal = local_rank;
    return DT_OK;
}

dt_status device_resolve(dt_device_kind req, int local_rank, int local_size, int share, dt_device_kind *kind,
                         int *ordinal, char *why, size_t n)
{
    if (why && n) why[0] = '\0';
    if (req == DT_DEVICE_CPU) {
        *kind = DT_DEVICE_CPU;
        *ordinal = -1;
        return DT_OK;
    }
    /* Asked of the build, not the counter, so that a test's counter cannot hide it. */
    if (req == DT_DEVICE_CUDA && !device_info_cuda_built())
        return status_set_error(DT_ERR_UNSUPPORTED,
                                "--device cuda, but this dtrain was built without CUDA. Fix: rebuild with "
                                "the CUDA toolkit installed (cmake -DDTRAIN_CUDA=ON), or use --device cpu");
    char none[256];
    int visible = device_count(none, sizeof none);
    if (visible <= 0) {
        if (req == DT_DEVICE_CUDA)
            return status_set_error(DT_ERR_DEVICE,
                                    "--device cuda, but no GPU is visible (%s). Fix: check nvidia-smi and "
                                    "CUDA_VISIBLE_DEVICES, request GPUs from SLURM (srun --gres=gpu:N), or "
                                    "use --device cpu",
                                    none);
        /* The reason is kept: where GPUs were assigned, dt_init tells the user why they sit idle. */
        if (why && n) snprintf(why, n, "%s", none);
        *kind = DT_DEVICE_CPU;
        *ordinal = -1;
        return DT_OK;
    }
    dt_status s = device_map(visible, local_rank, local_size, share, ordinal);
    if (s) return s;
    *kind = DT_DEVICE_CUDA;
    return DT_OK;
}

int device_gpus_assigned(const char *visible, const char *step_gpus, const char *job_gpus, char *what, size_t n)
{
    if (what && n) what[0] = '\0';
    /* CUDA_VISIBLE_DEVICES decides when it is set: "", -1 or NoDevFiles hide every GPU on purpose. */
    if (visible) {
        if (device_visible_parse(visible, NULL, 0) <= 0) return 0;
        if (what && n) snprintf(what, n, "CUDA_VISIBLE_DEVICES=%.100s", visible);
        return 1;
    }
    const int step = step_gpus && *step_gpus;
    if (!step && !(job_gpus && *job_gpus)) return 0;
    if (what && n)
        snprintf(what, n, "%s=%.100s", step ? "SLURM_STEP_GPUS" : "SLURM_JOB_GPUS", step ? step_gpus : job_gpus);
    return 1;
}

unsigned long long device_list_key(const char *list)
{
    if (!list) return 0; /* unset: every rank without a list is in one group */
    /* dtrain's one hash (base/hash.h), never 0 for a set list (so "" and unset differ). */
    const unsigned long long h = fnv1a_buffer(list, strlen(list));
    return h ? h : 1;
}

void device_group(const unsigned long long *keys, int n, int me, int *index, int *size)
{
    int idx = 0, count = 0;
    for (int i = 0; i < n; i++)
        if (keys[i] == keys[me]) {
            if (i < me) idx++;
            count++;
        }
    *index = idx;
    *size = count;
}

dt_status device_activate(int ordinal, char *bus_id, size_t n)
{
    dt_status s = device_info_select(ordinal, bus_id, n);
    if (s) return s;
    /* CUDA prints hex digits upper case; sysfs names them lower case. */
    for (char *p = bus_id; *p; p++)
        if (*p >= 'A' && *p <= 'F') *p = (char)(*p - 'A' + 'a');
    return DT_OK;
}

dt_status device_check_unique(const char *ids, const unsigned char *mig, int n, size_t stride)
{
    for (int i = 0; i < n; i++) {
        const char *a = ids + (size_t)i * stride;
        if (!a[0]) continue;
        for (int j = i + 1; j < n; j++) {
            if (strncmp(a, ids + (size_t)j * stride, stride) != 0) continue;
            /* MIG slices of one GPU share its PCI bus id, and NCCL tells ranks' GPUs apart by it
             * (two ranks with one bus id are "Duplicate GPU detected"): not the same slice, but
             * the same refusal, with its own fix. */
            if (mig && (mig[i] || mig[j]))
                return status_set_error(DT_ERR_DEVICE,
                                        "local ranks %d and %d run on MIG devices of one GPU (%s): NCCL takes "
                                        "ranks on one PCI bus id for two ranks on one GPU and refuses them, and "
                                        "MIG slices share their GPU's bus id. Fix: share the slices through host "
                                        "memory with --gpu-comm mpi, give the ranks MIG devices of different "
                                        "GPUs, or use --device cpu",
                                        i, j, a);
            return status_set_error(DT_ERR_DEVICE,
                                    "local ranks %d and %d both selected GPU %s: two ranks on one GPU "
                                    "is not supported by NCCL (it can hang). Fix: give each task its own "
                                    "GPU (srun --gpus-per-task=1, or distinct CUDA_VISIBLE_DEVICES), start "
                                    "fewer ranks per node, share the GPU with --gpu-comm mpi (slower), or "
                                    "use --device cpu",
                                    i, j, a);
        }
    }
    return DT_OK;
}

/* What one entry of CUDA_VISIBLE_DEVICES is. */
enum { CVD_INDEX, CVD_UUID, CVD_EMPTY, CVD_NEGATIVE, CVD_BAD_UUID, CVD_OTHER };

static int cvd_is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

/* Classifies the entry [p, p+len) (blanks around it already trimmed); an index goes to *index
 * (saturated) and *tail tells whether text followed its digits, which CUDA ignores. */
static int cvd_classify(const char *p, size_t len, unsigned long *index, int *tail)
{
    *tail = 0;
    if (len == 0) return CVD_EMPTY;
    if (len > 4 && (strncmp(p, "GPU-", 4) == 0 || strncmp(p, "MIG-", 4) == 0)) {
        /* GPU-<hex and dashes>, as nvidia-smi -L prints (a unique prefix is enough); MIG-<...> also
         * takes the older MIG-GPU-<uuid>/<gi>/<ci> form. */
        const int mig = p[0] == 'M';
        int hex = 0;
        for (size_t i = 4; i < len; i++) {
            if (cvd_is_hex(p[i]))
                hex = 1;
            else if (p[i] != '-' && !(mig && (p[i] == '/' || p[i] == 'G' || p[i] == 'P' || p[i] == 'U')))
                return CVD_BAD_UUID;
        }
        return hex ? CVD_UUID : CVD_BAD_UUID;
    }
    if (len >= 4 && (strncmp(p, "GPU-", 4) == 0 || strncmp(p, "MIG-", 4) == 0)) return CVD_BAD_UUID;
    size_t i = 0;
    if (p[0] == '-' && len > 1 && p[1] >= '0' && p[1] <= '9') return CVD_NEGATIVE;
    if (p[0] == '+') i = 1;
    if (i >= len || p[i] < '0' || p[i] > '9') return CVD_OTHER;
    unsigned long v = 0;
    for (; i < len && p[i] >= '0' && p[i] <= '9'; i++) v = v > 100000000UL ? v : v * 10 + (unsigned long)(p[i] - '0');
    *index = v;
    *tail = i < len;
    return CVD_INDEX;
}

/* One entry of the list: its text with the blanks around it trimmed (CUDA skips them, as strtoul
 * does), and what cvd_classify makes of it. */
typedef struct cvd_entry {
    const char *text;
    size_t len;
    int kind;
    unsigned long index;
    int tail;
} cvd_entry;

/* Reads the entry that starts at p into *x; returns where the next one starts. */
static const char *cvd_read(const char *p, cvd_entry *x)
{
    const size_t len = strcspn(p, ",");
    size_t lead = 0;
    while (lead < len && (p[lead] == ' ' || p[lead] == '\t')) lead++;
    x->text = p + lead;
    x->len = len - lead;
    while (x->len > 0 && (x->text[x->len - 1] == ' ' || x->text[x->len - 1] == '\t')) x->len--;
    x->kind = cvd_classify(x->text, x->len, &x->index, &x->tail);
    return p + len + (p[len] == ',');
}

/* How much of an entry a message quotes. */
static int cvd_shown(const cvd_entry *x) { return (int)(x->len < 64 ? x->len : 64); }

/* The entry (1-based) among list's first e that names the same device as x, or 0: the same device
 * twice makes CUDA report none at all. */
static int cvd_same_before(const char *list, int e, const cvd_entry *x)
{
    const char *r = list;
    for (int f = 0; f < e; f++) {
        cvd_entry y;
        r = cvd_read(r, &y);
        const int same = x->kind == CVD_INDEX
                             ? y.kind == CVD_INDEX && y.index == x->index
                             : y.kind == CVD_UUID && y.len == x->len && strncmp(y.text, x->text, x->len) == 0;
        if (same) return f + 1;
    }
    return 0;
}

/* Why entry e (0-based, of entries, starting at p) is where CUDA stops reading list, after seen
 * valid entries. */
static void cvd_why_invalid(const char *list, int entries, int e, const char *p, const cvd_entry *x, int seen,
                            char *why, size_t n)
{
    char what[160];
    switch (x->kind) {
        case CVD_EMPTY:
            snprintf(what, sizeof what, "entry %d is empty (a doubled, leading or trailing comma?)", e + 1);
            break;
        case CVD_NEGATIVE:
            snprintf(what, sizeof what, "entry %d '%.*s' is negative", e + 1, cvd_shown(x), x->text);
            break;
        case CVD_BAD_UUID:
            snprintf(what, sizeof what,
                     "entry %d '%.*s' is not a GPU UUID (GPU- or MIG- and hex digits, as "
                     "nvidia-smi -L prints them)",
                     e + 1, cvd_shown(x), x->text);
            break;
        default:
            snprintf(what, sizeof what,
                     "entry %d '%.*s' is not a device index (0, 1, ...) or UUID (GPU-..., "
                     "MIG-...)",
                     e + 1, cvd_shown(x), x->text);
    }
    const int after = entries - e - 1;
    char seen_txt[96], hid[64];
    if (seen == 0)
        snprintf(seen_txt, sizeof seen_txt, "it sees no GPU");
    else
        snprintf(seen_txt, sizeof seen_txt, "it sees only the %d entr%s before it (%.*s)", seen,
                 seen == 1 ? "y" : "ies", (int)(p - list - 1 < 48 ? p - list - 1 : 48), list);
    if (after == 0)
        snprintf(hid, sizeof hid, "nothing follows it");
    else
        snprintf(hid, sizeof hid, "the %d entr%s after it %s hidden", after, after == 1 ? "y" : "ies",
                 after == 1 ? "is" : "are");
    snprintf(why, n,
             "CUDA_VISIBLE_DEVICES='%.200s': %s; CUDA reads the list up to its first invalid entry, "
             "so %s and %s%s",
             list, what, seen_txt, hid,
             x->kind == CVD_NEGATIVE && seen == 0 ? " (-1 is the usual way to hide every GPU)" : "");
}

int device_visible_parse(const char *list, char *why, size_t n)
{
    if (why && n) why[0] = '\0';
    if (!list) return -1;
    if (!list[strspn(list, " \t")]) {
        /* The usual way to hide every GPU (CUDA: "set to an empty string, no GPU devices are
         * visible"), not a list with a missing entry. */
        if (why && n) snprintf(why, n, "CUDA_VISIBLE_DEVICES is empty (no GPU visible)");
        return 0;
    }
    int entries = 1;
    int mig_first = 0; /* the entry (1-based) of the first MIG device, 0 none yet */
    for (const char *q = list; *q; q++) entries += *q == ',';
    const char *p = list;
    int seen = 0;
    for (int e = 0; e < entries; e++) {
        cvd_entry x;
        const char *next = cvd_read(p, &x);
        if (x.kind != CVD_INDEX && x.kind != CVD_UUID) {
            if (why && n) cvd_why_invalid(list, entries, e, p, &x, seen, why, n);
            return seen;
        }
        const int same = cvd_same_before(list, e, &x);
        if (same) {
            if (why && n)
                snprintf(why, n,
                         "CUDA_VISIBLE_DEVICES='%.200s': entries %d and %d name the same GPU (%.*s); "
                         "CUDA then shows no GPU at all. Fix: list each GPU once",
                         list, same, e + 1, cvd_shown(&x), x.text);
            return 0;
        }
        if (x.kind == CVD_UUID && x.text[0] == 'M') {
            /* CUDA enumerates one MIG device per process (NVIDIA's MIG User Guide, "CUDA Device
             * Enumeration"; the CUDA Programming Guide on CUDA_VISIBLE_DEVICES: "Only single MIG
             * instance enumeration is supported"): a second one is not seen, so planning stops
             * before it, as at an invalid entry. */
            if (mig_first) {
                if (why && n)
                    snprintf(why, n,
                             "CUDA_VISIBLE_DEVICES='%.200s': entry %d '%.*s' is a second MIG device, and CUDA "
                             "shows a process only one MIG device (entry %d): it sees %d GPU%s and the "
                             "entries from %d on are not used. Fix: give each rank exactly one MIG device "
                             "(srun --gpus-per-task=1, or CUDA_VISIBLE_DEVICES=MIG-<uuid> set per rank)",
                             list, e + 1, cvd_shown(&x), x.text, mig_first, seen, seen == 1 ? "" : "s", e + 1);
                return seen;
            }
            mig_first = e + 1;
        }
        if (x.kind == CVD_INDEX && x.tail && why && n && !why[0])
            snprintf(why, n,
                     "CUDA_VISIBLE_DEVICES='%.200s': entry %d '%.*s' is read by CUDA as index %lu (the "
                     "text after the number is ignored). Fix: give indices or GPU-/MIG- UUIDs only",
                     list, e + 1, cvd_shown(&x), x.text, x.index);
        seen++;
        p = next;
    }
    return seen;
}

void device_plan(const char *list, int local_rank, int local_size, int share, char *out, size_t n)
{
    out[0] = '\0';
    if (!list || !*list) return;
    /* Only the entries CUDA reads: those before the first invalid one. */
    const int count = device_visible_parse(list, NULL, 0);
    if (count <= 0) return;
    int ordinal;
    if (device_map(count, local_rank, local_size, share, &ordinal) != DT_OK) {
        snprintf(out, n, "- (%d ranks, %d GPUs)", local_size, count);
        return;
    }
    const char *p = list;
    for (int i = 0; i < ordinal; i++) p = strchr(p, ',') + 1;
    size_t len = strcspn(p, ",");
    /* Trimmed as device_visible_parse reads the entry (CUDA skips the blanks too). */
    while (len && (*p == ' ' || *p == '\t')) p++, len--;
    while (len && (p[len - 1] == ' ' || p[len - 1] == '\t')) len--;
    snprintf(out, n, "%.*s", (int)(len < n ? len : n - 1), p);
}
