/*
 * cmd_data_verify.c - `dtrain data verify PATH`: reads every sample and label of each split, and
 * for .dts checks the payload CRC; goes on past a bad sample and names each (the first
 * --max-errors per split) with a count per split, so one run finds them all.
 */
#include "launch/data/cmd_data.h"

#include "launch/cli.h"
#include "runtime/data/dts.h"
#include "runtime/data/stats.h"
#include "base/printable.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Where sample i of s is, for the list of bad ones: an image's path, a .dts byte offset; nothing
 * for the other formats, whose messages name the file and record. */
static void sample_where(const ds_split *s, size_t i, char *out, size_t n)
{
    char path[4200], raw[4400] = "";
    if (imagefolder_sample_path(s, i, path, sizeof path))
        snprintf(raw, sizeof raw, " (%s)", path);
    else if (strcmp(s->format, "dts") == 0)
        snprintf(raw, sizeof raw, " (byte offset %llu of %s)", (unsigned long long)dts_sample_offset(s, i), s->source);
    text_escape_controls(raw, out, n); /* a file name in a shared dataset is anyone's: no escape reaches the terminal */
}

/* Every sample and label of one split, and for a .dts the payload CRC. Prints OK, or each bad
 * sample (the first a->max_errors) with the split's count and the CRC verdict; *nbad and *crc_bad
 * say what was found. EXIT_OK once every sample was read, bad or not; EXIT_FAIL (printed) when the
 * pass itself failed (out of memory, a thread that did not start). */
static int verify_split(const ds_split *s, const data_args *a, size_t *nbad, int *crc_bad)
{
    *nbad = 0;
    *crc_bad = 0;
    /* A payload CRC that does not match says only that some byte is damaged: every sample is still
     * read, so that the bad labels and values among them are named. */
    char crc_msg[2048] = "";
    if (strcmp(s->format, "dts") == 0 && dts_check_payload(s) != DT_OK) {
        *crc_bad = 1;
        snprintf(crc_msg, sizeof crc_msg, "%s", dt_last_error());
    }
    ds_bad_samples bad;
    if (ds_find_bad_samples(s, a->threads, (size_t)a->max_errors, &bad)) {
        cli_error("%s", dt_last_error());
        return EXIT_FAIL;
    }
    *nbad = bad.count;
    if (!bad.count && !*crc_bad) {
        printf("  %s: OK, %zu sample%s of %dx%dx%d read, every label in 0..%d, every value finite%s\n", s->split,
               s->count, cli_s((long)s->count), s->c, s->h, s->w, s->classes - 1,
               strcmp(s->format, "dts") == 0 ? ", payload CRC-32 matches" : "");
        return EXIT_OK;
    }
    if (bad.count) printf("  %s: %zu of %zu sample%s bad:\n", s->split, bad.count, s->count, cli_s((long)s->count));
    for (size_t k = 0; k < bad.listed; k++) {
        char where[4300];
        sample_where(s, bad.items[k].index, where, sizeof where);
        printf("    sample %zu%s: %s\n", bad.items[k].index, where, bad.items[k].why);
    }
    if (bad.count > bad.listed)
        printf("    ... and %zu more (--max-errors 0 names every one)\n", bad.count - bad.listed);
    if (*crc_bad)
        printf("  %s: %s%s\n", s->split, crc_msg,
               bad.count ? "" : " (every sample reads as valid: the damage is in values or labels that look right)");
    ds_bad_samples_free(&bad);
    return EXIT_OK;
}

int cmd_data_verify(int argc, char **argv)
{
    data_args a;
    int rc = data_parse_args("data verify", argc, argv, 1, &a);
    if (rc) return rc < 0 ? EXIT_OK : rc;
    /* Labels (and IDX values) are left to the reads, so a bad one is listed rather than refused. */
    a.open.check_on_read = 1;
    const char *path = a.pos[0];
    ds_split *train = NULL, *test = NULL;
    if ((rc = data_open_split(path, &a, "train", &train))) return rc;
    printf("verifying %s: %s\n", path, train->format);
    size_t bad[2] = {0, 0};
    int crc[2] = {0, 0};
    rc = verify_split(train, &a, &bad[0], &crc[0]);
    char why[1200];
    /* A test split whose files are there but do not open is a fault like a bad sample; none at
     * all is a dataset without one. */
    const int broken = !rc && data_open_test(path, &a, &test, why, sizeof why);
    if (!rc && test)
        rc = verify_split(test, &a, &bad[1], &crc[1]);
    else if (!rc && !broken)
        printf("  test: none (%s)\n", why);
    const size_t total = train->count + (test ? test->count : 0), nbad = bad[0] + bad[1];
    if (!rc && !nbad && !crc[0] && !crc[1] && !broken) {
        printf("OK: %zu sample%s checked\n", total, cli_s((long)total));
    } else if (!rc && broken && !nbad && !crc[0]) {
        /* The train split is sound: the test split is the one fault. */
        data_test_error(path, why,
                        "to have no test split instead, remove its files; then run dtrain data verify again");
        rc = EXIT_FAIL;
    } else if (!rc) {
        char per[200], crcs[200] = "";
        snprintf(per, sizeof per, "train %zu of %zu", bad[0], train->count);
        if (test) snprintf(per + strlen(per), sizeof per - strlen(per), ", test %zu of %zu", bad[1], test->count);
        if (crc[0] || crc[1])
            snprintf(crcs, sizeof crcs, "the payload CRC-32 of %s does not match",
                     crc[0] && crc[1] ? "both shards"
                     : crc[0]         ? "the train shard"
                                      : "the test shard");
        /* A shard is written whole, so its fix is a new one; other formats' samples are files or
         * records of their own. */
        const char *fix = strcmp(train->format, "dts") == 0
                              ? "write the shard again from a clean source (dtrain data convert)"
                              : "replace or remove the samples named above";
        fflush(stdout); /* the list above, before the verdict on stderr */
        if (nbad)
            cli_error("%s: %zu of %zu sample%s bad (%s)%s%s: %s, then run dtrain data verify again", path, nbad, total,
                      cli_s((long)total), per, crcs[0] ? "; " : "", crcs, fix);
        else
            cli_error("%s: %s, though every sample reads as valid (%zu checked): %s, then run dtrain data verify again",
                      path, crcs, total, fix);
        if (broken) data_test_error(path, why, "to have no test split instead, remove its files");
        rc = EXIT_FAIL;
    }
    ds_close(train);
    ds_close(test);
    return rc;
}
