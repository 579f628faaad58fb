/*
 * fuzz_metrics.c - the --metrics records `dtrain plot` reads back (plot_parse_line, launch/plot/plot_data.c).
 *
 * Input: the lines of a metrics file, each given to plot_parse_line in turn (a refused line is
 * skipped, as if the file went on). Beyond ASan/UBSan/leaks: a refused line says why and leaves the
 * data as it was; an accepted one adds a row or joins the last (same step), steps rise strictly
 * from row to row, the series bits are the rows' own; every row, written back as a record with
 * %.17g, parses to the same step and values (nan stays nan).
 */
#include "fuzz_common.h"
#include "launch/plot/plot_data.h"

#include <math.h>

static int same(double a, double b) { return (isnan(a) && isnan(b)) || a == b; }

static void check_roundtrip(const plot_row *r)
{
    char line[1024];
    int k = snprintf(line, sizeof line, "{\"step\": %ld", r->step);
    for (int i = 0; i < PLOT_NCOL; i++)
        if (r->have & (1u << i))
            k += snprintf(line + k, sizeof line - (size_t)k, ", \"%s\": %.17g", plot_key(i), r->v[i]);
    snprintf(line + k, sizeof line - (size_t)k, "}");
    plot_data d = {0};
    char why[256];
    const int rc = plot_parse_line(&d, line, strlen(line), why, sizeof why);
    FUZZ_CHECK(rc == 0 && d.n == 1, "a row written back as '%s' was refused: %s", line, why);
    FUZZ_CHECK(d.rows[0].step == r->step && d.rows[0].have == r->have, "'%s' read back another step or series", line);
    for (int i = 0; i < PLOT_NCOL; i++)
        if (r->have & (1u << i))
            FUZZ_CHECK(same(d.rows[0].v[i], r->v[i]), "'%s': %s read back as %.17g", line, plot_key(i), d.rows[0].v[i]);
    plot_data_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    log_set_level(LOG_LEVEL_ERROR);
    plot_data d = {0};
    const char *p = (const char *)data, *end = p + size;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        const size_t n0 = d.n;
        const unsigned have0 = d.have;
        const int mixed0 = d.mixed;
        plot_row last0 = n0 ? d.rows[n0 - 1] : (plot_row){0};
        char why[256] = "x";
        const int rc = plot_parse_line(&d, p, len, why, sizeof why);
        FUZZ_CHECK(rc == 0 || rc == -1, "plot_parse_line returned %d", rc);
        if (rc) {
            FUZZ_CHECK(why[0], "a refused line gave no reason");
            FUZZ_CHECK(d.n == n0 && d.have == have0 && d.mixed == mixed0, "a refused line changed the data");
            FUZZ_CHECK(!n0 || !memcmp(&d.rows[n0 - 1], &last0, sizeof last0), "a refused line changed the last row");
        } else {
            FUZZ_CHECK(d.n == n0 || d.n == n0 + 1, "one line made %zu rows of %zu", d.n, n0);
            FUZZ_CHECK(d.n == n0 + 1 || d.rows[n0 - 1].step == last0.step, "a joined line changed the step");
            FUZZ_CHECK(memmem(p, len, "\"step\"", 6), "a line without \"step\" was accepted");
        }
        p += len + (nl != NULL);
    }
    unsigned have = 0;
    for (size_t i = 0; i < d.n; i++) {
        FUZZ_CHECK(d.rows[i].step >= 0, "row %zu has step %ld", i, d.rows[i].step);
        FUZZ_CHECK(!i || d.rows[i].step > d.rows[i - 1].step, "row %zu's step %ld is not after %ld", i, d.rows[i].step,
                   d.rows[i - 1].step);
        FUZZ_CHECK(!(d.rows[i].have >> PLOT_NCOL), "row %zu has series bits %#x", i, d.rows[i].have);
        have |= d.rows[i].have;
        check_roundtrip(&d.rows[i]);
    }
    FUZZ_CHECK(have == d.have, "the data's series %#x are not its rows' %#x", d.have, have);
    plot_data_free(&d);
    return 0;
}
