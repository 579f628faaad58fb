/*
 * test_ckpt_files.c - the files the checkpoint writer makes in a directory that other users and
 * other jobs share (runtime/checkpoint/ckpt_write_file.h, ckpt_lock.h): the temporary file is the
 * writer's own (a link planted under its predictable name is never followed, a left-over file of
 * that name is never reused), another user's link under the file's own name is never written
 * through, files take the mode the umask gives, and a second run given the same
 * checkpoint directory is refused before it removes the first run's temporary files, while a run
 * that was killed leaves no lock behind; a link planted as the lock file is not written through,
 * and the temporary files in flight are what the second Ctrl-C's clean-up removes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "runtime/checkpoint/ckpt_lock.h"
#include "runtime/checkpoint/ckpt_temps.h"
#include "runtime/checkpoint/ckpt_write_file.h"
#include "dtrain.h"
#include "tmp_dir.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct fixture {
    char dir[64];
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f || tmp_dir_make(f->dir, sizeof f->dir, "dt_ckpt_files")) return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    if (tmp_dir_remove(f->dir)) return -1;
    free(f);
    return 0;
}

static const char *in(const fixture *f, const char *name, char *buf)
{
    snprintf(buf, 256, "%s/%s", f->dir, name);
    return buf;
}

static void put(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

static void expect_text(const char *path, const char *text)
{
    char got[64] = "";
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    size_t n = fread(got, 1, sizeof got - 1, fp);
    fclose(fp);
    got[n] = '\0';
    assert_string_equal(got, text);
}

static dt_status write_text(const char *path, const char *text)
{
    const ckpt_part part = {text, strlen(text)};
    return ckpt_write_file_atomic(path, "checkpoint", "--checkpoint-dir", &part, 1);
}

/* Another user plants out.tmp.<pid> -> their victim file in a shared directory: the writer must not
 * write (or truncate) the victim, nor rename the link into out's place. */
static void test_planted_link_not_followed(void **state)
{
    fixture *f = *state;
    char victim[256], out[256], tmp[320];
    put(in(f, "victim", victim), "mine");
    in(f, "out", out);
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", out, (int)getpid());
    assert_int_equal(symlink(victim, tmp), 0);
    assert_int_equal(write_text(out, "new"), DT_OK);
    expect_text(victim, "mine");
    struct stat sb;
    assert_int_equal(lstat(out, &sb), 0);
    assert_true(S_ISREG(sb.st_mode));
    expect_text(out, "new");
    /* The link is not the writer's: it stays, and nothing else is left. */
    assert_int_equal(lstat(tmp, &sb), 0);
    assert_true(S_ISLNK(sb.st_mode));
    snprintf(tmp, sizeof tmp, "%s.tmp.%d.1", out, (int)getpid());
    assert_int_equal(access(tmp, F_OK), -1);
}

/* A link planted under the lock file's name (DIR/.dtrain.lock -> a file of this user's): taking the
 * lock writes its holder's line over the file, so the link is refused and the file left as it was. */
static void test_lock_link_not_followed(void **state)
{
    fixture *f = *state;
    char victim[256], lock[256];
    put(in(f, "victim", victim), "mine");
    assert_int_equal(symlink(victim, in(f, ".dtrain.lock", lock)), 0);
    int fd = -1;
    assert_int_equal(ckpt_dir_lock(f->dir, &fd), DT_ERR_IO);
    assert_non_null(strstr(dt_last_error(), ".dtrain.lock is a symbolic link, not dtrain's lock file"));
    assert_int_equal(fd, -1);
    expect_text(victim, "mine");
}

/* The temporary files noted in flight are what a second Ctrl-C removes; one forgotten (renamed
 * into place) is not. */
static void test_temps_removed(void **state)
{
    fixture *f = *state;
    char a[256], b[256];
    put(in(f, "a.tmp", a), "partial");
    put(in(f, "b.tmp", b), "done");
    const int sa = ckpt_temp_note(a), sb = ckpt_temp_note(b);
    assert_true(sa >= 0 && sb >= 0 && sa != sb);
    ckpt_temp_forget(sb);
    ckpt_temps_remove();
    assert_int_equal(access(a, F_OK), -1);
    expect_text(b, "done");
    ckpt_temp_forget(sa);
}

/* Another user plants ckpt-<step>.dtc -> a file of this user's (outside the shared directory) before
 * the save of that step: the writer must not replace that file, which the kernel's
 * protected_symlinks does not prevent (realpath reads links without following them). The link is
 * replaced by the checkpoint in its own directory; a path the user names (--dump-params) that is
 * such a link is refused before any work; this user's own link is still written through. Root
 * alone can make a link owned by another uid. */
static void test_foreign_link_not_followed(void **state)
{
    if (geteuid() != 0) skip();
    fixture *f = *state;
    char victim[256], out[256], named[256], own[256];
    put(in(f, "victim", victim), "mine");
    assert_int_equal(symlink(victim, in(f, "ckpt-0000000005.dtc", out)), 0);
    assert_int_equal(lchown(out, 4242, 4242), 0);
    assert_int_equal(write_text(out, "new"), DT_OK);
    expect_text(victim, "mine");
    struct stat sb;
    assert_int_equal(lstat(out, &sb), 0);
    assert_true(S_ISREG(sb.st_mode));
    expect_text(out, "new");

    assert_int_equal(symlink(victim, in(f, "params.bin", named)), 0);
    assert_int_equal(lchown(named, 4242, 4242), 0);
    assert_int_equal(ckpt_write_file_try(named, "--dump-params"), DT_ERR_IO);
    assert_non_null(strstr(dt_last_error(), "symbolic link of another user (uid 4242)"));
    char real[4096];
    int in_place = 1;
    assert_string_equal(ckpt_write_target(named, real, sizeof real, &in_place), named);
    assert_int_equal(in_place, 0);

    assert_int_equal(symlink(victim, in(f, "own.bin", own)), 0);
    assert_int_equal(write_text(own, "through"), DT_OK);
    expect_text(victim, "through");
    assert_int_equal(lstat(own, &sb), 0);
    assert_true(S_ISLNK(sb.st_mode));
}

/* A left-over file under the first temporary name (a killed job's, or another node's process with
 * this pid): neither truncated nor a reason to refuse a path that can be written. */
static void test_leftover_temp_not_reused(void **state)
{
    fixture *f = *state;
    char out[256], tmp[320];
    in(f, "params.bin", out);
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", out, (int)getpid());
    put(tmp, "other job");
    assert_int_equal(ckpt_write_file_try(out, "--dump-params"), DT_OK);
    assert_int_equal(write_text(out, "params"), DT_OK);
    expect_text(out, "params");
    expect_text(tmp, "other job");
}

/* The umask decides the mode, as for any file the user makes: a group project directory with
 * umask 002 gets group-writable files, a private umask 077 owner-only ones. */
static void test_mode_follows_umask(void **state)
{
    fixture *f = *state;
    char out[256];
    struct stat sb;
    const mode_t old = umask(002);
    assert_int_equal(write_text(in(f, "g", out), "x"), DT_OK);
    assert_int_equal(stat(out, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0664);
    umask(077);
    assert_int_equal(write_text(in(f, "p", out), "x"), DT_OK);
    umask(old);
    assert_int_equal(stat(out, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
}

/* A child process that takes ck's lock as a running `dtrain train` does (ckpt_dir_prepare), writes
 * line over the lock file's own when not NULL (a holder on another node), and holds the lock for
 * hold_s seconds (0: until killed); returned once it holds it. The caller kills and reaps it. */
static pid_t start_holder(const char *ck, const char *line, unsigned hold_s)
{
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    const pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        int fd;
        char ok = ckpt_dir_prepare(ck, &fd) == DT_OK ? 'y' : 'n';
        const ssize_t n = line ? (ssize_t)strlen(line) : 0;
        if (ok == 'y' && line && (ftruncate(fd, 0) != 0 || pwrite(fd, line, (size_t)n, 0) != n)) ok = 'n';
        if (write(ready[1], &ok, 1) != 1) _exit(1);
        if (hold_s)
            sleep(hold_s);
        else
            pause();
        _exit(0); /* the lock goes with the process */
    }
    char ok = 0;
    assert_int_equal(read(ready[0], &ok, 1), 1);
    close(ready[0]), close(ready[1]);
    assert_int_equal(ok, 'y');
    return child;
}

/* A child holds dir (as a running `dtrain train` does, with a save in progress); a second prepare
 * is refused, naming the holder, and leaves the save's temporary file alone. Once the child is
 * killed the lock is gone with it, and the next prepare removes the left-over temporary file but
 * not a link named like one. */
static void test_second_run_refused(void **state)
{
    fixture *f = *state;
    char ck[256], saving[320], link_tmp[320];
    in(f, "ck", ck);
    const pid_t child = start_holder(ck, NULL, 0);
    snprintf(saving, sizeof saving, "%s/ckpt-0000000007.dtc.tmp.%d", ck, (int)child);
    put(saving, "a save in progress");
    int fd = -1;
    const dt_status s = ckpt_dir_prepare(ck, &fd);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    assert_int_equal(s, DT_ERR_IO);
    assert_int_equal(fd, -1);
    char pid_text[32];
    snprintf(pid_text, sizeof pid_text, "pid %d on ", (int)child);
    assert_non_null(strstr(dt_last_error(), "in use by another dtrain run"));
    assert_non_null(strstr(dt_last_error(), pid_text));
    assert_non_null(strstr(dt_last_error(), ck));
    assert_int_equal(access(saving, F_OK), 0);

    snprintf(link_tmp, sizeof link_tmp, "%s/ckpt-0000000008.dtc.tmp.1", ck);
    assert_int_equal(symlink(saving, link_tmp), 0);
    assert_int_equal(ckpt_dir_prepare(ck, &fd), DT_OK);
    assert_true(fd >= 0);
    assert_int_equal(access(saving, F_OK), -1);
    struct stat sb;
    assert_int_equal(lstat(link_tmp, &sb), 0);
    close(fd);
}

/* A child on "another node" (its lock file's line names another host) holds dir: the second
 * prepare waits for it (DTRAIN_TEST_LOCK_WAIT_S 2 s here, 120 s for real: a crashed node's lock
 * lasts until its file server's lease ends) and goes on once the child lets go after 1 s; held
 * throughout, it is refused after the wait with the advice for a node that is down. */
static void test_holder_elsewhere_waited_for(void **state)
{
    fixture *f = *state;
    char ck[256];
    in(f, "ck", ck);
    setenv("DTRAIN_TEST_LOCK_WAIT_S", "2", 1);
    for (int hold_s = 1; hold_s <= 30; hold_s += 29) {
        const pid_t child =
            start_holder(ck, "pid 4242 on another-node.example since 2026-12-06T00:00:00Z\n", (unsigned)hold_s);
        int fd = -1;
        const dt_status s = ckpt_dir_prepare(ck, &fd);
        const int waited_out = s != DT_OK;
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", waited_out ? dt_last_error() : "");
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        if (hold_s == 1) {
            assert_int_equal(s, DT_OK); /* released within the wait */
            assert_true(fd >= 0);
            close(fd);
        } else {
            assert_int_equal(s, DT_ERR_IO);
            assert_non_null(strstr(msg, "pid 4242 on another-node.example"));
            assert_non_null(strstr(msg, "if that run's node is down"));
        }
    }
    unsetenv("DTRAIN_TEST_LOCK_WAIT_S");
}

/* The holder's line is written by whoever can write the lock file and printed in another user's
 * refusal: its control characters and ill-formed UTF-8 bytes are shown as C escapes, so a planted
 * escape sequence never reaches that user's terminal. */
static void test_holder_line_escaped(void **state)
{
    fixture *f = *state;
    char ck[256];
    in(f, "ck", ck);
    const pid_t child = start_holder(ck,
                                     "\x1b]0;owned\x07\x1b[2Jpid 7 \x9b"
                                     "31m\n",
                                     0);
    int fd = -1;
    const dt_status s = ckpt_dir_prepare(ck, &fd);
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", dt_last_error());
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    assert_int_equal(s, DT_ERR_IO);
    assert_non_null(strstr(msg, "(\\x1b]0;owned\\x07\\x1b[2Jpid 7 \\x9b31m)"));
    for (const char *c = msg; *c; c++)
        if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e)
            fail_msg("byte 0x%02x in: %s", (unsigned char)*c, msg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_planted_link_not_followed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lock_link_not_followed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_temps_removed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_foreign_link_not_followed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_leftover_temp_not_reused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mode_follows_umask, setup, teardown),
        cmocka_unit_test_setup_teardown(test_second_run_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_holder_elsewhere_waited_for, setup, teardown),
        cmocka_unit_test_setup_teardown(test_holder_line_escaped, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
