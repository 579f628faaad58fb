/*
 * test_cuda_parse.c - the pure parsers of doctor's CUDA facts (launch/doctor/cuda_parse.c):
 * versions, the driver table, /proc/driver/nvidia/version, version.json, cuda_runtime_api.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "launch/doctor/doctor_cuda.h"

static void test_versions_and_table(void **state)
{
    (void)state;
    char t[32];
    cuda_version_text(12020, t, sizeof t);
    assert_string_equal(t, "12.2");
    cuda_version_text(13000, t, sizeof t);
    assert_string_equal(t, "13.0");
    cuda_version_text(0, t, sizeof t);
    assert_string_equal(t, "unknown");
    assert_int_equal(cuda_driver_max_cuda(535), 12020);
    assert_int_equal(cuda_driver_max_cuda(536), 12020);
    assert_int_equal(cuda_driver_max_cuda(580), 13000);
    assert_int_equal(cuda_driver_max_cuda(999), 13000);
    assert_int_equal(cuda_driver_max_cuda(440), 0);
    assert_int_equal(cuda_min_driver_branch(12020), 535);
    assert_int_equal(cuda_min_driver_branch(12080), 570);
    assert_int_equal(cuda_min_driver_branch(14000), 0);
    int branch = -1;
    assert_int_equal(cuda_parse_kmod("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 "
                                     "01:15:15 UTC 2023\nGCC version:  gcc 12\n",
                                     t, sizeof t, &branch),
                     0);
    assert_string_equal(t, "535.104.05");
    assert_int_equal(branch, 535);
    assert_int_equal(cuda_parse_kmod("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release", t,
                                     sizeof t, &branch),
                     -1); /* "for x86_64" sits between: no version right after "Kernel Module" */
    assert_int_equal(
        cuda_parse_kmod("NVRM version: NVIDIA UNIX Open Kernel Module 570.86.15 Release", t, sizeof t, &branch), 0);
    assert_int_equal(branch, 570);
    assert_int_equal(cuda_parse_kmod("garbage", t, sizeof t, &branch), -1);
    assert_string_equal(t, "");
    assert_int_equal(branch, 0);
    assert_int_equal(cuda_parse_kmod("Kernel Module 535", t, sizeof t, &branch), -1);
    assert_int_equal(cuda_parse_version("12.2"), 12020);
    assert_int_equal(cuda_parse_version("12.2.140"), 12020);
    assert_int_equal(cuda_parse_version("12020"), 12020);
    assert_int_equal(cuda_parse_version("12"), 0);
    assert_int_equal(cuda_parse_version("12.x"), 0);
    assert_int_equal(cuda_parse_version("abc"), 0);
    assert_int_equal(cuda_parse_version(""), 0);
    assert_int_equal(cuda_parse_version_json("{\n  \"cuda\" : {\n    \"name\" : \"CUDA SDK\",\n    \"version\" : "
                                             "\"12.2.20230823\"\n  },\n  \"cuda_cccl\" : { \"version\" : \"1.0\" }\n}"),
                     12020);
    assert_int_equal(cuda_parse_version_json("{\"cuda_cccl\" : {\"version\" : \"12.2.140\"}}"), 0);
    assert_int_equal(cuda_parse_version_json("{\"cuda\" : {\"name\" : \"x\"}, \"nvcc\" : {\"version\" : \"12.2\"}}"),
                     0);
    assert_int_equal(cuda_parse_version_json("{\"cuda\" : {\"version\" : 12}}"), 0);
    assert_int_equal(cuda_parse_runtime_header("/* x */\n#define CUDART_VERSION  13000\n"), 13000);
    assert_int_equal(cuda_parse_runtime_header("#define CUDART_VERSION_MAJOR 13\n"), 0);
    assert_int_equal(cuda_parse_runtime_header("nothing"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_versions_and_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
