/*
 * path_checks.c - doctor's path.* rows: the paths a job names, checked before it trains, so that a
 * checkpoint directory on a full or read-only disk is found now rather than at the first save.
 *
 * Each check is the one training makes (ckpt_dir_check is ckpt_dir_prepare's, ckpt_dir_lock_query
 * asks about the lock ckpt_dir_lock takes, ds_open is train's and `dtrain data info`'s open,
 * ckpt_write_file_try is --trace's), so doctor and train cannot disagree about a path; doctor only
 * leaves out their changes (it makes no directory, takes no lock nor makes its file, and removes
 * no unfinished save, which a run still writing there may own).
 */
#include "launch/doctor/doctor_paths.h"

#include "base/io_error.h"
#include "launch/doctor/doctor.h"
#include "runtime/checkpoint/ckpt_lock.h"
#include "runtime/checkpoint/ckpt_write_file.h"
#include "runtime/data/dts.h"
#include "runtime/data/reader.h"
#include "runtime/model/model.h"
#include "base/status.h"

#include <errno.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif
#ifndef RAMFS_MAGIC
#define RAMFS_MAGIC 0x858458f6
#endif

static double mib(uint64_t b) { return (double)b / 1048576.0; }

/* One checkpoint of the model as train saves it: its parameters and optimizer state (train's
 * default optimizer, as memory.model plans it). 0 when there is no model or it does not plan. */
static uint64_t ckpt_bytes(const doctor_model_query *m)
{
    if (!m || !m->model) return 0;
    dt_optim_config oc;
    dt_optim_defaults(&oc);
    dt_memory_plan_config c;
    dt_memory_plan_defaults(&c);
    c.spec = m->model;
    c.input = m->input;
    c.optim = &oc;
    dt_memory_plan p;
    if (dt_model_plan_memory(NULL, &c, &p)) return 0;
    return (uint64_t)p.kinds.params + (uint64_t)p.kinds.optimizer;
}

/* The checkpoint directory's row: whether train may make or use it, and whose lock is on it.
 * *exists: it is there already. 1 when it fails (the row said why; nothing more to check). */
static int check_ckpt_dir(const doctor_path_query *p, int *exists, doc_list *job)
{
    if (ckpt_dir_check(p->ckpt_dir, exists)) {
        doc_add(job, "path.checkpoint", DOC_FAIL, "make the directory writable or give another --checkpoint-dir",
                "%s (dtrain train refuses it before training, exit 2)", dt_last_error());
        return 1;
    }
    /* Another run's lock: train would be refused there now (ckpt_dir_lock). Asked, not taken. */
    int held = 0;
    char who[256] = "";
    if (*exists && ckpt_dir_lock_query(p->ckpt_dir, &held, who, sizeof who)) {
        doc_add(job, "path.checkpoint", DOC_FAIL,
                "mend the lock file " CKPT_LOCK_NAME " as the error says, or give another --checkpoint-dir",
                "%s (dtrain train refuses it before training, exit 2)", dt_last_error());
        return 1;
    }
    if (held && ckpt_lock_held_elsewhere(who))
        doc_add(job, "path.checkpoint", DOC_WARN,
                "wait for that run to end, or give this job another --checkpoint-dir; if that node is down, remove "
                "the lock file " CKPT_LOCK_NAME " once no run of this job's is there",
                "--checkpoint-dir %s is a writable directory, but a dtrain run on another node holds its lock now "
                "(%s): dtrain train given it waits up to %d s for the lock (a crashed node's lock lasts until its "
                "file server's lease ends), then is refused (exit 2)",
                p->ckpt_dir, who, CKPT_LOCK_WAIT_ELSEWHERE_S);
    else if (held)
        doc_add(job, "path.checkpoint", DOC_WARN,
                "wait for that run to end (its lock goes with its process), or give this job another --checkpoint-dir",
                "--checkpoint-dir %s is a writable directory, but a dtrain run holds its lock now (%s): dtrain train "
                "given it is refused before training (exit 2)",
                p->ckpt_dir, who);
    else if (*exists)
        doc_add(job, "path.checkpoint", DOC_PASS, NULL, "--checkpoint-dir %s is a writable directory; %s", p->ckpt_dir,
                who[0] ? who : "no run holds its lock");
    else
        doc_add(job, "path.checkpoint", DOC_PASS, NULL, "--checkpoint-dir %s can be made (its parent is writable)",
                p->ckpt_dir);
    return 0;
}

/* Into parent (n bytes), the directory whose file system the checkpoints land on: dir itself, or
 * its parent until it is made. */
static void ckpt_fs_dir(const char *dir, int exists, char *parent, size_t n)
{
    snprintf(parent, n, "%s", dir);
    if (exists) return;
    char *slash = strrchr(parent, '/');
    if (!slash)
        snprintf(parent, n, ".");
    else if (slash == parent)
        parent[1] = '\0';
    else
        *slash = '\0';
}

/* A warning row when the file system at parent is held in memory (tmpfs, ramfs). */
static void check_ckpt_fs(const doctor_path_query *p, const char *parent, doc_list *job)
{
    struct statfs fs;
    if (statfs(parent, &fs) == 0 &&
        ((unsigned long)fs.f_type == TMPFS_MAGIC || (unsigned long)fs.f_type == RAMFS_MAGIC))
        doc_add(job, "path.checkpoint_fs", DOC_WARN,
                "checkpoint to a disk or shared file system that outlives the job (a tmpfs may also be cleaned "
                "at the job's end by the scheduler)",
                "--checkpoint-dir %s is on a %s, held in memory: its checkpoints are lost at reboot and count "
                "against the node's memory",
                p->ckpt_dir, (unsigned long)fs.f_type == TMPFS_MAGIC ? "tmpfs" : "ramfs");
}

/* The free space at parent against what saving the model's checkpoints needs (all of them kept, or
 * --keep-checkpoints N and the one being written); without a model, the free space alone. */
static void check_ckpt_space(const doctor_path_query *p, const doctor_model_query *m, const char *parent, doc_list *job)
{
    uint64_t avail = 0;
    if (dts_free_bytes(parent, &avail)) {
        doc_add(job, "path.checkpoint_space", DOC_SKIP, NULL, "the free space of %s is unknown (statvfs: %s)",
                p->ckpt_dir, strerror(errno));
        return;
    }
    const uint64_t one = ckpt_bytes(m);
    if (!one) {
        doc_add(job, "path.checkpoint_space", avail ? DOC_PASS : DOC_FAIL,
                avail ? NULL : "free space there or give another --checkpoint-dir", "%.1f MiB free for checkpoints%s",
                mib(avail), m && m->model ? "" : " (add --model M to compare it with one checkpoint)");
        return;
    }
    /* Saving writes the new checkpoint beside the kept ones before the oldest goes. */
    const uint64_t need = one * (uint64_t)(p->keep > 0 ? p->keep + 1 : 1);
    char kept[64] = "";
    if (p->keep > 0) snprintf(kept, sizeof kept, " x %d kept + 1 being written", p->keep);
    if (avail < need)
        doc_add(job, "path.checkpoint_space", DOC_FAIL,
                "free space there, give another --checkpoint-dir, or keep fewer with --keep-checkpoints N",
                "%.1f MiB free under %s, but one checkpoint of %s is %.1f MiB%s (%.1f MiB)", mib(avail), p->ckpt_dir,
                m->model, mib(one), kept, mib(need));
    else
        doc_add(job, "path.checkpoint_space", DOC_PASS, NULL,
                "%.1f MiB free under %s; one checkpoint of %s is %.1f MiB%s%s", mib(avail), p->ckpt_dir, m->model,
                mib(one), kept, p->keep > 0 ? "" : " (every checkpoint is kept: --keep-checkpoints N bounds them)");
}

static void check_ckpt(const doctor_path_query *p, const doctor_model_query *m, doc_list *job)
{
    int exists = 0;
    if (check_ckpt_dir(p, &exists, job)) return;
    char parent[4096];
    ckpt_fs_dir(p->ckpt_dir, exists, parent, sizeof parent);
    check_ckpt_fs(p, parent, job);
    check_ckpt_space(p, m, parent, job);
}

static uint64_t tree_bytes;
static int add_size(const char *path, const struct stat *sb, int type, struct FTW *f)
{
    (void)path, (void)f;
    if (type == FTW_F) tree_bytes += (uint64_t)sb->st_size;
    return 0;
}

static dt_status data_open(const char *path, const doctor_model_query *m, ds_split **s)
{
    /* Structure only: the labels are checked as samples are read, so a large set opens quickly. */
    ds_open_opts o = {.check_on_read = 1};
    /* An image folder is resized to the model's input; --input CxHxW gives it. */
    if (m && m->input && model_spec_input(m->input, &o.c, &o.h, &o.w) != 3) {
        o.c = o.h = o.w = 0; /* N (features) sizes no image; a bad shape is the model's to refuse */
        status_clear_error();
    }
    return ds_open(path, &o, s);
}

void doctor_paths_collect(const doctor_path_query *p, const doctor_model_query *m, doctor_path_facts *f)
{
    memset(f, 0, sizeof *f);
    ds_split *s = NULL;
    if (!p->data) return;
    if (data_open(p->data, m, &s)) {
        f->data_failed = 1;
        snprintf(f->data_error, sizeof f->data_error, "%s", dt_last_error());
        return;
    }
    ds_close(s);
}

#define DATA_FIX "give the dataset's path (dtrain data info PATH shows what it holds)"

/* The ranks that could not open --data, one row per host and error: a dataset on a node-local
 * disk, or a file system not mounted on some nodes, fails there alone. Returns how many failed. */
static int data_failures(const doctor_facts *all, int world, doc_list *job)
{
    int failed = 0;
    for (int r = 0; r < world; r++) failed += all[r].paths.data_failed != 0;
    if (!failed) return 0;
    int *ranks = malloc((size_t)world * sizeof *ranks);
    unsigned char *done = calloc((size_t)world, 1);
    for (int r = 0; r < world; r++) {
        const doctor_path_facts *f = &all[r].paths;
        if (!f->data_failed || (done && done[r])) continue;
        int n = 0;
        if (ranks && done) {
            for (int q = r; q < world; q++)
                if (all[q].paths.data_failed && !done[q] && strcmp(all[q].paths.data_error, f->data_error) == 0 &&
                    strcmp(all[q].pl.hostname, all[r].pl.hostname) == 0) {
                    ranks[n++] = q;
                    done[q] = 1;
                }
        } else if (ranks) {
            ranks[n++] = r; /* out of memory for the grouping: a row per rank */
        }
        doc_add_ranks(job, ranks, n, "path.data", DOC_FAIL, DATA_FIX, "%s (on %s)", f->data_error, all[r].pl.hostname);
    }
    free(ranks);
    free(done);
    return failed;
}

static void check_data(const char *path, const doctor_model_query *m, const doctor_facts *all, int world, doc_list *job)
{
    if (data_failures(all, world, job)) return;
    ds_split *s = NULL;
    if (data_open(path, m, &s)) {
        doc_add(job, "path.data", DOC_FAIL, DATA_FIX, "%s", dt_last_error());
        return;
    }
    tree_bytes = 0;
    (void)nftw(path, add_size, 16, FTW_PHYS);
    doc_add(job, "path.data", DOC_PASS, NULL, "--data %s: %s, %zu training samples of %dx%dx%d, %d classes, %.1f MiB",
            path, s->format, s->count, s->c, s->h, s->w, s->classes, mib(tree_bytes));
    ds_close(s);
}

static void check_metrics(const char *path, doc_list *job)
{
    dt_status s = ckpt_write_file_try(path, "--metrics");
    if (!s && access(path, F_OK) == 0 && access(path, W_OK) != 0) {
        const int err = errno;
        char advice[IO_FIX_LEN];
        doc_add(job, "path.metrics", DOC_FAIL, io_error_fix(err, "--metrics file", "--metrics", advice, sizeof advice),
                "cannot write --metrics %s: %s", path, strerror(err));
        return;
    }
    if (s)
        doc_add(job, "path.metrics", DOC_FAIL, "give a --metrics file in a directory you can write", "%s",
                dt_last_error());
    else
        doc_add(job, "path.metrics", DOC_PASS, NULL, "--metrics %s can be written", path);
}

void doctor_paths_check(const doctor_path_query *p, const doctor_model_query *m, const doctor_facts *all, int world,
                        doc_list *job)
{
    if (p->ckpt_dir) check_ckpt(p, m, job);
    if (p->data) check_data(p->data, m, all, world, job);
    if (p->metrics) check_metrics(p->metrics, job);
}
