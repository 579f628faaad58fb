/*
 * test_path.c - unit tests of base/path.c: path_parent_dir names the directory that holds a path's
 * entry and the entry's name, the way the atomic writers (fsync of the directory after a rename)
 * and the output checks (two names for one file) need it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "base/path.h"

static void expect_split(const char *path, const char *dir, const char *entry)
{
    char got[64];
    memset(got, 'x', sizeof got);
    const char *name = path_parent_dir(path, got, sizeof got);
    assert_string_equal(got, dir);
    assert_string_equal(name, entry);
    assert_true(name >= path && name <= path + strlen(path)); /* points into path */
}

static void test_parent_dir(void **state)
{
    (void)state;
    expect_split("model.bin", ".", "model.bin");
    expect_split("runs/a/model.bin", "runs/a", "model.bin");
    expect_split("/model.bin", "/", "model.bin");
    expect_split("/srv/runs/ck", "/srv/runs", "ck");
    expect_split("./x", ".", "x");
    expect_split("../x", "..", "x");
    /* Trailing slashes name the same entry: runs/ck/ is ck in runs. */
    expect_split("runs/ck/", "runs", "ck/");
    expect_split("runs/ck//", "runs", "ck//");
    expect_split("ck/", ".", "ck/");
    expect_split("/", "/", ""); /* the root is no entry */
    expect_split("", ".", "");
}

static void test_parent_dir_truncates(void **state)
{
    (void)state;
    char small[5];
    const char *name = path_parent_dir("abcdefgh/x", small, sizeof small);
    assert_string_equal(small, "abcd"); /* cut to fit, still a string */
    assert_string_equal(name, "x");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parent_dir),
        cmocka_unit_test(test_parent_dir_truncates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
