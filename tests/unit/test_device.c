/*
 * test_device.c - local rank -> GPU mapping under CUDA_VISIBLE_DEVICES semantics, through the GPU
 * count seam, so it runs on machines without a GPU; and the one-GPU-per-rank check.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernels/device_info.h"
#include "runtime/placement/device.h"

#include <stdio.h>
#include <string.h>

static int fake_gpus;
static int fake_count(char *why, size_t n)
{
    if (fake_gpus == 0) snprintf(why, n, "fake: no GPU");
    return fake_gpus;
}

static void test_map(void **st)
{
    (void)st;
    int o = -9;
    /* Sees exactly one (srun --gpus-per-task=1): takes it, whatever the local rank. */
    assert_int_equal(device_map(1, 3, 4, 0, &o), DT_OK);
    assert_int_equal(o, 0);
    /* Sees several: the local-rank-th. */
    for (int r = 0; r < 4; r++) {
        assert_int_equal(device_map(4, r, 4, 0, &o), DT_OK);
        assert_int_equal(o, r);
    }
    assert_int_equal(device_map(8, 1, 2, 0, &o), DT_OK);
    assert_int_equal(o, 1);
    /* More local ranks than GPUs: refused, never two ranks on one GPU. */
    o = -9;
    assert_int_equal(device_map(2, 0, 4, 0, &o), DT_ERR_DEVICE);
    assert_int_equal(o, -9);
    assert_non_null(strstr(dt_last_error(), "4 ranks on this node but only 2 GPUs"));
    assert_non_null(strstr(dt_last_error(), "--ntasks-per-node=2"));
    assert_int_equal(device_map(2, 3, -1, 0, &o), DT_ERR_DEVICE);
    assert_int_equal(device_map(0, 0, 1, 0, &o), DT_ERR_DEVICE);
    assert_non_null(strstr(dt_last_error(), "no GPU"));
    /* Collectives through MPI (--gpu-comm mpi): ranks share the GPUs round robin. */
    for (int r = 0; r < 5; r++) {
        assert_int_equal(device_map(2, r, 5, 1, &o), DT_OK);
        assert_int_equal(o, r % 2);
    }
    assert_int_equal(device_map(1, 3, 4, 1, &o), DT_OK);
    assert_int_equal(o, 0);
    assert_int_equal(device_map(0, 0, 1, 1, &o), DT_ERR_DEVICE);
}

static void test_resolve(void **st)
{
    (void)st;
    device_set_count_fn(fake_count);
    dt_device_kind k;
    int o;
    fake_gpus = 0;
    char why[256] = "stale";
    assert_int_equal(device_resolve(DT_DEVICE_AUTO, 0, 2, 0, &k, &o, why, sizeof why), DT_OK);
    assert_int_equal(k, DT_DEVICE_CPU);
    assert_int_equal(o, -1);
    /* The fallback keeps the counter's reason, for the warning where GPUs were assigned. */
    assert_string_equal(why, "fake: no GPU");
    assert_int_equal(device_resolve(DT_DEVICE_CPU, 0, 2, 0, &k, &o, why, sizeof why), DT_OK);
    assert_string_equal(why, "");
    assert_int_equal(device_resolve(DT_DEVICE_CPU, 0, 2, 0, &k, &o, NULL, 0), DT_OK);
    assert_int_equal(k, DT_DEVICE_CPU);
    dt_status s = device_resolve(DT_DEVICE_CUDA, 0, 2, 0, &k, &o, NULL, 0);
#ifdef DTRAIN_HAVE_CUDA
    assert_int_equal(s, DT_ERR_DEVICE);
    assert_non_null(strstr(dt_last_error(), "fake: no GPU"));
    assert_non_null(strstr(dt_last_error(), "--device cpu"));
    fake_gpus = 4;
    assert_int_equal(device_resolve(DT_DEVICE_AUTO, 2, 4, 0, &k, &o, NULL, 0), DT_OK);
    assert_int_equal(k, DT_DEVICE_CUDA);
    assert_int_equal(o, 2);
    assert_int_equal(device_resolve(DT_DEVICE_CUDA, 1, 4, 0, &k, &o, NULL, 0), DT_OK);
    assert_int_equal(o, 1);
    /* CPU on request even with GPUs. */
    assert_int_equal(device_resolve(DT_DEVICE_CPU, 1, 4, 0, &k, &o, NULL, 0), DT_OK);
    assert_int_equal(k, DT_DEVICE_CPU);
    fake_gpus = 2;
    assert_int_equal(device_resolve(DT_DEVICE_AUTO, 0, 3, 0, &k, &o, NULL, 0), DT_ERR_DEVICE);
#else
    assert_int_equal(s, DT_ERR_UNSUPPORTED);
    assert_non_null(strstr(dt_last_error(), "without CUDA"));
#endif
    device_set_count_fn(NULL);
}

static void test_unique(void **st)
{
    (void)st;
    char ids[4][16] = {"0000:01:00.0", "0000:02:00.0", "", ""};
    assert_int_equal(device_check_unique(&ids[0][0], NULL, 4, 16), DT_OK); /* CPU ranks ("") never clash */
    strcpy(ids[3], "0000:01:00.0");
    assert_int_equal(device_check_unique(&ids[0][0], NULL, 4, 16), DT_ERR_DEVICE);
    assert_non_null(strstr(dt_last_error(), "local ranks 0 and 3"));
    assert_non_null(strstr(dt_last_error(), "0000:01:00.0"));
    assert_null(strstr(dt_last_error(), "MIG"));
    /* MIG slices of one GPU share its bus id: the refusal says so, and names --gpu-comm mpi. */
    const unsigned char mig[4] = {1, 0, 0, 1};
    assert_int_equal(device_check_unique(&ids[0][0], mig, 4, 16), DT_ERR_DEVICE);
    assert_non_null(strstr(dt_last_error(), "local ranks 0 and 3 run on MIG devices of one GPU (0000:01:00.0)"));
    assert_non_null(strstr(dt_last_error(), "--gpu-comm mpi"));
}

/* GPUs assigned: CUDA_VISIBLE_DEVICES decides when set (hiding forms are no assignment), else
 * SLURM's lists. */
static void test_assigned(void **st)
{
    (void)st;
    char what[128];
    assert_int_equal(device_gpus_assigned("0,1", NULL, NULL, what, sizeof what), 1);
    assert_string_equal(what, "CUDA_VISIBLE_DEVICES=0,1");
    assert_int_equal(device_gpus_assigned(NULL, "2", "0-3", what, sizeof what), 1);
    assert_string_equal(what, "SLURM_STEP_GPUS=2");
    assert_int_equal(device_gpus_assigned(NULL, "", "0,1", what, sizeof what), 1);
    assert_string_equal(what, "SLURM_JOB_GPUS=0,1");
    const char *hidden[] = {"", " ", "-1", "NoDevFiles", "none"};
    for (size_t i = 0; i < sizeof hidden / sizeof *hidden; i++) {
        if (device_gpus_assigned(hidden[i], "0", "0", what, sizeof what))
            fail_msg("CUDA_VISIBLE_DEVICES='%s' counted as assigned GPUs", hidden[i]);
        assert_string_equal(what, "");
    }
    assert_int_equal(device_gpus_assigned(NULL, NULL, NULL, NULL, 0), 0);
}

/* Ranks index the GPUs of their own list: 3 tasks with 2 GPUs each take the first of theirs;
 * ranks that share a list split it. */
static void test_group(void **st)
{
    (void)st;
    const unsigned long long own[3] = {device_list_key("0,1"), device_list_key("2,3"), device_list_key("4,5")};
    assert_true(own[0] != own[1] && own[1] != own[2]);
    assert_int_equal(device_list_key(NULL), 0);
    assert_true(device_list_key("") != 0);
    char out[64];
    const char *lists[3] = {"0,1", "2,3", "4,5"};
    for (int r = 0; r < 3; r++) {
        int idx = -1, size = -1;
        device_group(own, 3, r, &idx, &size);
        assert_int_equal(idx, 0);
        assert_int_equal(size, 1);
        device_plan(lists[r], idx, size, 0, out, sizeof out);
        assert_string_equal(out, lists[r] == lists[0] ? "0" : r == 1 ? "2" : "4");
    }
    /* Two share 0,1 and one has 4,5 of its own. */
    const unsigned long long mixed[3] = {device_list_key("0,1"), device_list_key("4,5"), device_list_key("0,1")};
    int idx, size;
    device_group(mixed, 3, 2, &idx, &size);
    assert_int_equal(idx, 1);
    assert_int_equal(size, 2);
    device_plan("0,1", idx, size, 0, out, sizeof out);
    assert_string_equal(out, "1");
    device_group(mixed, 3, 1, &idx, &size);
    assert_int_equal(idx, 0);
    assert_int_equal(size, 1);
}

static void test_plan(void **st)
{
    (void)st;
    char out[64];
    device_plan("0,1,2,3", 2, 4, 0, out, sizeof out);
    assert_string_equal(out, "2");
    device_plan("5", 1, 2, 0, out, sizeof out); /* --gpus-per-task=1: each sees its own one */
    assert_string_equal(out, "5");
    device_plan("GPU-aa,GPU-bb", 1, 2, 0, out, sizeof out);
    assert_string_equal(out, "GPU-bb");
    device_plan(" 1, 2 ", 1, 2, 0, out, sizeof out); /* blanks around entries, which CUDA skips */
    assert_string_equal(out, "2");
    device_plan("0,1", 0, 4, 0, out, sizeof out);
    assert_string_equal(out, "- (4 ranks, 2 GPUs)");
    device_plan("0,1", 3, 4, 1, out, sizeof out); /* shared under --gpu-comm mpi */
    assert_string_equal(out, "1");
    device_plan("", 0, 1, 0, out, sizeof out);
    assert_string_equal(out, "");
    device_plan(NULL, 0, 1, 0, out, sizeof out);
    assert_string_equal(out, "");
}

/* Malformed CUDA_VISIBLE_DEVICES entries, read as CUDA reads them: up to the first invalid one. */
static void test_visible_devices(void **st)
{
    (void)st;
    char why[512];
    static const struct {
        const char *list;
        int seen;
        const char *says; /* NULL: no warning */
    } cases[] = {
        {"0,1,2,3", 4, NULL},
        {"3,1", 2, NULL},
        {"0, 1", 2, NULL},
        {"GPU-8932f937-d72c-4106-c12f-20bd9faed9f6,GPU-aa", 2, NULL},
        {"MIG-GPU-8932f937-d72c-4106-c12f-20bd9faed9f6/1/0", 1, NULL},
        {"GPU-xyz,,", 0,
         "CUDA_VISIBLE_DEVICES='GPU-xyz,,': entry 1 'GPU-xyz' is not a GPU UUID (GPU- or MIG- and "
         "hex digits, as nvidia-smi -L prints them); CUDA reads the list up to its first invalid "
         "entry, so it sees no GPU and the 2 entries after it are hidden"},
        {"-1", 0,
         "CUDA_VISIBLE_DEVICES='-1': entry 1 '-1' is negative; CUDA reads the list up to its first invalid "
         "entry, so it sees no GPU and nothing follows it (-1 is the usual way to hide every GPU)"},
        {"a,b", 0,
         "CUDA_VISIBLE_DEVICES='a,b': entry 1 'a' is not a device index (0, 1, ...) or UUID (GPU-..., "
         "MIG-...); CUDA reads the list up to its first invalid entry, so it sees no GPU and the 1 entry "
         "after it is hidden"},
        {"0,2,-1,1", 2,
         "entry 3 '-1' is negative; CUDA reads the list up to its first invalid entry, so it sees "
         "only the 2 entries before it (0,2) and the 1 entry after it is hidden"},
        {"0,,1", 1,
         "entry 2 is empty (a doubled, leading or trailing comma?); CUDA reads the list up to its first "
         "invalid entry, so it sees only the 1 entry before it (0) and the 1 entry after it is hidden"},
        {"0,1,", 2, "entry 3 is empty"},
        {"0,1,0", 0, "entries 1 and 3 name the same GPU (0); CUDA then shows no GPU at all"},
        {"1gpu2,2", 2, "entry 1 '1gpu2' is read by CUDA as index 1 (the text after the number is ignored)"},
        {"GPU-", 0, "entry 1 'GPU-' is not a GPU UUID"},
        {"", 0, "CUDA_VISIBLE_DEVICES is empty (no GPU visible)"},
        {" ", 0, "CUDA_VISIBLE_DEVICES is empty (no GPU visible)"},
        /* CUDA shows a process one MIG device: the first. */
        {"MIG-aa", 1, NULL},
        {"MIG-aa,MIG-bb", 1,
         "entry 2 'MIG-bb' is a second MIG device, and CUDA shows a process only one MIG device (entry 1)"},
        {"0,MIG-aa,MIG-bb,1", 2, "entry 3 'MIG-bb' is a second MIG device"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const int seen = device_visible_parse(cases[i].list, why, sizeof why);
        if (seen != cases[i].seen) fail_msg("'%s': CUDA reads %d entries, not %d", cases[i].list, cases[i].seen, seen);
        if (!cases[i].says && why[0]) fail_msg("'%s': unexpected warning '%s'", cases[i].list, why);
        if (cases[i].says && !strstr(why, cases[i].says))
            fail_msg("'%s': warning '%s' lacks '%s'", cases[i].list, why, cases[i].says);
    }
    assert_int_equal(device_visible_parse(NULL, why, sizeof why), -1);
    assert_string_equal(why, "");
    assert_int_equal(device_visible_parse("-1", NULL, 0), 0);

    /* The plan takes only the entries CUDA reads. */
    char out[64];
    device_plan("-1", 0, 1, 0, out, sizeof out);
    assert_string_equal(out, "");
    device_plan("0,1,,2", 0, 3, 0, out, sizeof out);
    assert_string_equal(out, "- (3 ranks, 2 GPUs)");
    device_plan("0,,1", 0, 1, 0, out, sizeof out);
    assert_string_equal(out, "0");
    device_plan("GPU-xyz,,", 0, 1, 0, out, sizeof out);
    assert_string_equal(out, "");
    /* Two ranks given one list of two MIG devices: CUDA shows each only the first, so rank 1 is
     * planned on MIG-aa, not MIG-bb (dt_init then marks the two ranks on one device). */
    device_plan("MIG-aa,MIG-bb", 1, 2, 0, out, sizeof out);
    assert_string_equal(out, "MIG-aa");
}

static void test_real_counter_without_gpu(void **st)
{
    (void)st;
    /* On a machine without a driver the real counter says 0 and why, never fails hard. */
    char why[256];
    int n = device_count(why, sizeof why);
    assert_true(n >= 0);
    if (n == 0) assert_true(strlen(why) > 0);
}

/* The build links the device_info implementation of its own kind (cmake/sources.cmake), and one
 * without CUDA refuses every GPU question with the reason and the fix. */
static void test_build_kind(void **st)
{
    (void)st;
#ifdef DTRAIN_HAVE_CUDA
    assert_int_equal(device_info_cuda_built(), 1);
    assert_non_null(strstr(dt_version_string(), "(cuda"));
#else
    assert_int_equal(device_info_cuda_built(), 0);
    assert_non_null(strstr(dt_version_string(), "(cpu only)"));
    char why[256];
    assert_int_equal(device_count(why, sizeof why), 0);
    assert_non_null(strstr(why, "built without CUDA"));
    assert_non_null(strstr(why, "-DDTRAIN_CUDA=ON"));
    char bus[32] = "stale";
    assert_int_equal(device_activate(0, bus, sizeof bus), DT_ERR_UNSUPPORTED);
    assert_string_equal(bus, "");
    assert_non_null(strstr(dt_last_error(), "without CUDA"));
    char ver[64];
    device_info_cuda_version(ver, sizeof ver);
    assert_string_equal(ver, "-");
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_map),
        cmocka_unit_test(test_resolve),
        cmocka_unit_test(test_unique),
        cmocka_unit_test(test_assigned),
        cmocka_unit_test(test_group),
        cmocka_unit_test(test_plan),
        cmocka_unit_test(test_visible_devices),
        cmocka_unit_test(test_real_counter_without_gpu),
        cmocka_unit_test(test_build_kind),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
