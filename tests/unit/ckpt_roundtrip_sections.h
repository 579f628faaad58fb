/*
 * ckpt_roundtrip_sections.h - the named-sections half of the checkpoint round-trip property
 * (ckpt_roundtrip.h): sections from the input through dt_ckpt_add / dt_ckpt_add_per_rank, refused
 * exactly when the name is invalid, reserved or taken; read back through ckpt_file_open_fd (every
 * CRC) and dt_ckpt_open_latest; written again from what was read, the same file.
 */
#ifndef DT_TESTS_CKPT_ROUNDTRIP_SECTIONS_H
#define DT_TESTS_CKPT_ROUNDTRIP_SECTIONS_H

#include "ckpt_roundtrip_base.h"

/* ---------------------------------------------------------------- named sections */

#define RT_MAX_SECTIONS 6

typedef struct rt_section {
    char name[80];
    unsigned char bytes[64];
    size_t n;
    int per_rank;
} rt_section;

/* Whether dt_ckpt_add must take name, after the accepted ones (decided here, not by the code). */
static int rt_name_ok(const char *name, const rt_section *acc, int nacc)
{
    const size_t len = strlen(name);
    if (len < 1 || len > DT_CKPT_NAME_MAX) return 0;
    for (size_t i = 0; i < len; i++) {
        const char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-'))
            return 0;
    }
    if (!strncmp(name, "dtrain.", 7)) return 0;
    for (int i = 0; i < nacc; i++)
        if (!strcmp(acc[i].name, name)) return 0;
    return 1;
}

/* Writes sections into dir as step; a refused add must leave the writer going on. */
static int rt_write_sections(ckpt_rt *rt, const char *dir, long step, const rt_section *sec, int n)
{
    dt_ckpt_writer *w = NULL;
    RT_CHECK(dt_ckpt_begin(NULL, dir, step, &w) == DT_OK, "dt_ckpt_begin: %s", dt_last_error());
    for (int i = 0; i < n; i++) {
        const dt_status st = sec[i].per_rank ? dt_ckpt_add_per_rank(w, sec[i].name, sec[i].bytes, sec[i].n)
                                             : dt_ckpt_add(w, sec[i].name, sec[i].bytes, sec[i].n);
        RT_CHECK(st == DT_OK, "adding section %s: %s", sec[i].name, dt_last_error());
    }
    const dt_status st = dt_ckpt_commit(w);
    w = NULL;
    RT_CHECK(st == DT_OK, "dt_ckpt_commit into %s: %s", dir, dt_last_error());
out:
    if (w) dt_ckpt_discard(w);
    return rt->failed;
}

static int rt_sections(ckpt_rt *rt, const char *base)
{
    rt_section want[RT_MAX_SECTIONS], got[RT_MAX_SECTIONS];
    dt_ckpt_writer *w = NULL;
    dt_ckpt_reader *r = NULL;
    ckpt_file *f = NULL;
    int nacc = 0;
    char s[256], t[256], path[320], path_t[320];
    snprintf(s, sizeof s, "%s/s", base);
    snprintf(t, sizeof t, "%s/t", base);
    const long step = (long)(rt_bits(rt, 4) % 100000);
    const int n = (int)(rt_byte(rt) % (RT_MAX_SECTIONS + 1));
    RT_CHECK(rt_clear_dir(s) >= 0 && rt_clear_dir(t) >= 0, "cannot make %s and %s", s, t);
    RT_CHECK(dt_ckpt_begin(NULL, s, step, &w) == DT_OK, "dt_ckpt_begin: %s", dt_last_error());
    for (int i = 0; i < n; i++) {
        const unsigned flags = rt_byte(rt);
        rt_section x = {.per_rank = (int)(flags & 1)};
        if (flags & 2) { /* a name from the input, any bytes */
            const size_t len = rt_byte(rt) % 70;
            for (size_t k = 0; k < len; k++) x.name[k] = (char)rt_byte(rt);
        } else if ((flags & 4) && nacc) { /* the previous name again */
            snprintf(x.name, sizeof x.name, "%s", want[nacc - 1].name);
        } else {
            snprintf(x.name, sizeof x.name, "%s%u", flags & 8 ? "dtrain.s" : "s", (unsigned)i);
        }
        x.n = rt_byte(rt) % (sizeof x.bytes + 1);
        for (size_t k = 0; k < x.n; k++) x.bytes[k] = (unsigned char)rt_byte(rt);
        const int ok = rt_name_ok(x.name, want, nacc);
        const dt_status st =
            x.per_rank ? dt_ckpt_add_per_rank(w, x.name, x.bytes, x.n) : dt_ckpt_add(w, x.name, x.bytes, x.n);
        RT_CHECK((st == DT_OK) == ok, "dt_ckpt_add %s section name \"%s\": %s", st ? "refused" : "accepted", x.name,
                 st ? dt_last_error() : "");
        if (ok) want[nacc++] = x;
    }
    const dt_status cs = dt_ckpt_commit(w);
    w = NULL;
    RT_CHECK(cs == DT_OK, "dt_ckpt_commit of %d sections: %s", nacc, dt_last_error());
    snprintf(path, sizeof path, "%s/ckpt-%010ld.dtc", s, step);

    /* The file reader, every CRC checked. */
    int fd = -1;
    uint64_t size = 0;
    uint32_t version = 0;
    RT_CHECK(ckpt_open_regular(path, &fd, &size, &version) == DT_OK && version == CKPT_VERSION,
             "%s does not open as version %u: %s", path, CKPT_VERSION, dt_last_error());
    RT_CHECK(ckpt_file_open_fd(fd, size, path, step, 1, &f) == DT_OK, "ckpt_file_open_fd: %s", dt_last_error());
    RT_CHECK(f->n == (uint32_t)nacc && f->step == step && f->world == 1, "the file has %u sections, step %ld, world %d",
             f->n, f->step, f->world);
    for (int i = 0; i < nacc; i++) {
        unsigned char buf[64];
        RT_CHECK(!strcmp(f->e[i].name, want[i].name) && f->e[i].bytes == want[i].n &&
                     f->e[i].ranks == (uint32_t)want[i].per_rank,
                 "entry %d is \"%s\" of %llu bytes, ranks %u", i, f->e[i].name, (unsigned long long)f->e[i].bytes,
                 f->e[i].ranks);
        RT_CHECK(ckpt_file_read(f, (uint32_t)i, buf) == DT_OK && !memcmp(buf, want[i].bytes, want[i].n),
                 "section %s reads other bytes: %s", want[i].name, dt_last_error());
    }

    /* The directory's newest, through the public reader. */
    long got_step = -1;
    RT_CHECK(dt_ckpt_open_latest(NULL, s, &r, &got_step) == DT_OK && r && got_step == step,
             "dt_ckpt_open_latest(%s) gives step %ld: %s", s, got_step, dt_last_error());
    RT_CHECK(dt_ckpt_num_sections(r) == nacc && dt_ckpt_saved_world(r) == 1, "the reader has %d sections, world %d",
             dt_ckpt_num_sections(r), dt_ckpt_saved_world(r));
    for (int i = 0; i < nacc; i++) {
        size_t bytes = 1;
        got[i] = (rt_section){.per_rank = want[i].per_rank, .n = want[i].n};
        snprintf(got[i].name, sizeof got[i].name, "%s", dt_ckpt_section_name(r, i));
        RT_CHECK(!strcmp(got[i].name, want[i].name), "section %d is \"%s\", added \"%s\"", i, got[i].name,
                 want[i].name);
        RT_CHECK(dt_ckpt_section_size(r, got[i].name, &bytes) == DT_OK && bytes == want[i].n,
                 "section %s has %zu bytes, added %zu", got[i].name, bytes, want[i].n);
        RT_CHECK(dt_ckpt_read(r, got[i].name, got[i].bytes, bytes) == DT_OK &&
                     !memcmp(got[i].bytes, want[i].bytes, bytes),
                 "dt_ckpt_read of %s: %s", got[i].name, dt_last_error());
        if (want[i].per_rank) {
            unsigned char mine[64];
            RT_CHECK(dt_ckpt_read_rank(r, got[i].name, mine, bytes) == DT_OK && !memcmp(mine, want[i].bytes, bytes),
                     "dt_ckpt_read_rank of %s: %s", got[i].name, dt_last_error());
        }
    }

    /* Written again from what was read: the same file. */
    if (rt_write_sections(rt, t, step, got, nacc)) goto out;
    snprintf(path_t, sizeof path_t, "%s/ckpt-%010ld.dtc", t, step);
    rt_same_files(rt, path, path_t);
out:
    if (w) dt_ckpt_discard(w);
    dt_ckpt_close(r);
    if (f) ckpt_file_close(f);
    return rt->failed;
}

#endif
