/*
 * reader.c - ds_open: which format a dataset path holds, and the dispatch to that format's reader
 * (reader.h). Detection looks at the names a known layout has (MNIST's train-images-idx3-ubyte,
 * CIFAR-10's data_batch_1.bin, CIFAR-100's train.bin; failing those, class folders mean an image
 * folder, unless those folders are such datasets themselves: a parent folder given by mistake),
 * and for a single file at the IDX magic,
 * then at a size of whole CIFAR records.
 */
#include "runtime/data/reader.h"
#include "runtime/data/file_io.h"
#include "base/io_error.h"
#include "base/status.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

typedef struct format_entry {
    const char *name;
    dt_status (*open)(const char *path, const ds_open_opts *opts, ds_split *s);
} format_entry;

static const format_entry formats[] = {
    {"idx", idx_open}, {"cifar10", cifar_open}, {"cifar100", cifar_open}, {"imagefolder", imagefolder_open},
    {"dts", dts_open},
};

/* Whether dir holds a folder that is not hidden: the class folders of torchvision's ImageFolder
 * layout (ROOT/<class>/<image>, or ROOT/train + ROOT/val), which has no marker file. */
static int has_subdir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    int found = 0;
    struct dirent *e;
    while (!found && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char p[4200];
        struct stat sb;
        found = e->d_type == DT_DIR || ((e->d_type == DT_LNK || e->d_type == DT_UNKNOWN) &&
                                        (size_t)snprintf(p, sizeof p, "%s/%s", dir, e->d_name) < sizeof p &&
                                        stat(p, &sb) == 0 && S_ISDIR(sb.st_mode));
    }
    closedir(d);
    return found;
}

/* The layouts that are known by a file name (each maybe .gz). */
static const struct {
    const char *file, *format;
} marks[] = {
    {"train-images-idx3-ubyte", "idx"},
    {"t10k-images-idx3-ubyte", "idx"},
    {"data_batch_1.bin", "cifar10"},
    {"test_batch.bin", "cifar10"},
    {"train.bin", "cifar100"},
    {"test.bin", "cifar100"},
    {"train.dts", "dts"},
    {"test.dts", "dts"},
};

int ds_marker_name(const char *name)
{
    /* Every marker starts with 't' or 'd': the image folder's scan asks this of each of its entries. */
    if (name[0] != 't' && name[0] != 'd') return 0;
    for (size_t i = 0; i < sizeof marks / sizeof *marks; i++) {
        const size_t n = strlen(marks[i].file);
        if (strncmp(name, marks[i].file, n) == 0 && (name[n] == '\0' || strcmp(name + n, ".gz") == 0)) return 1;
    }
    return 0;
}

/* What a directory's marker files say, or NULL. */
static const char *detect_marks(const char *dir)
{
    char p[4200], found[4200];
    for (size_t i = 0; i < sizeof marks / sizeof *marks; i++) {
        if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, marks[i].file) >= sizeof p) return NULL;
        if (ds_find_file(p, found, sizeof found)) return marks[i].format;
    }
    return NULL;
}

/* The format a directory's layout says, or NULL. */
static const char *detect_dir(const char *dir)
{
    const char *fmt = detect_marks(dir);
    if (fmt) return fmt;
    return has_subdir(dir) ? "imagefolder" : NULL;
}

/* DT_OK, or the error for a folder taken for an image folder whose "class folders" are datasets
 * (--data ~/data where ~/data/mnist and ~/data/cifar-10-batches-bin are): the image-folder reader
 * would ask for --input, then call a dataset a class without images, and tell the user to remove
 * it. Named here, with the paths to give instead. */
static dt_status refuse_datasets_inside(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return DT_OK;
    char names[600] = "", p[4200];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || (size_t)snprintf(p, sizeof p, "%s/%s", dir, e->d_name) >= sizeof p) continue;
        const char *fmt = detect_marks(p);
        if (!fmt) continue;
        const size_t at = strlen(names);
        /* A long path is cut short in the message, which is all it is for. */
        if (n++ < 4 && snprintf(names + at, sizeof names - at, "%s%s (%s)", at ? ", " : "", p, fmt) < 0)
            names[at] = '\0';
    }
    closedir(d);
    if (n == 0) return DT_OK;
    return status_set_error(DT_ERR_INVALID_ARG,
                            "%s holds %s in its folders, not an image folder's class folders: %s%s; give "
                            "the dataset's own folder as the path (or --data-format imagefolder if these are classes)",
                            dir, n == 1 ? "a dataset" : "datasets", names, n > 4 ? ", ..." : "");
}

/* The format one file holds: IDX by its magic (read through zlib, so a .gz file is looked into),
 * else CIFAR by its plain size (records of 3073 or 3074 bytes; both divide a size only from
 * 3073 x 3074 bytes on, which is no real CIFAR file). NULL when neither. */
/* IDX's element size for its type byte, 0 for none. */
static int idx_type_size(unsigned char t)
{
    return t == 0x08 || t == 0x09 ? 1 : t == 0x0B ? 2 : t == 0x0C || t == 0x0D ? 4 : t == 0x0E ? 8 : 0;
}

/* Whether the 4 + 4 rank header bytes in m (got of them read) give an uncompressed file of
 * exactly size bytes. */
static int idx_size_matches(const unsigned char *m, int got, long long size)
{
    const int rank = m[3];
    if (got < 4 + 4 * rank) return 0;
    unsigned long long n = (unsigned long long)idx_type_size(m[2]);
    for (int i = 0; i < rank; i++) {
        const unsigned long long d = (unsigned long long)m[4 + 4 * i] << 24 | (unsigned long long)m[5 + 4 * i] << 16 |
                                     (unsigned long long)m[6 + 4 * i] << 8 | m[7 + 4 * i];
        if (d && n > (1ull << 62) / d) return 0;
        n *= d;
    }
    return n + 4 + 4 * (unsigned long long)rank == (unsigned long long)size;
}

static const char *detect_file(const char *path, const struct stat *sb)
{
    unsigned char m[20];
    memset(m, 0xff, sizeof m);
    int got = 0;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0 && S_ISREG(sb->st_mode)) {
        gzFile z = gzdopen(fd, "rb");
        if (z) {
            /* 8 bytes for the .dts magic; an IDX header has 4 + 4 x rank (at most 20). */
            got = gzread(z, m, sizeof m);
            if (got < 0) got = 0;
            if (got < 4) memset(m, 0xff, sizeof m);
            if (got < 8) memset(m + 4, 0xff, sizeof m - 4);
            gzclose(z);
        } else {
            close(fd);
        }
    } else if (fd >= 0) {
        close(fd);
    }
    /* A .dts shard before the size test: its size can happen to be whole CIFAR records. */
    if (memcmp(m, "DTSHARD1", 8) == 0) return "dts";
    const long long n = (long long)sb->st_size;
    const size_t pl = strlen(path);
    const int gz = pl > 3 && strcmp(path + pl - 3, ".gz") == 0;
    const int idx_magic = m[0] == 0 && m[1] == 0 && idx_type_size(m[2]) && m[3] >= 1 && m[3] <= 4;
    /* A CIFAR record can start 00 00 <type> <rank> too (label 0, then pixels): IDX only when the
     * header's dimensions make the file's size (a .gz file: its magic alone). */
    if (idx_magic && (gz || idx_size_matches(m, got, n))) return "idx";
    if (n > 0 && !gz) {
        if (n % 3073 == 0) return "cifar10";
        if (n % 3074 == 0) return "cifar100";
    }
    /* An IDX magic with a bad rank or size: the IDX reader's message says what it expected. */
    return S_ISREG(sb->st_mode) && m[0] == 0 && m[1] == 0 && idx_type_size(m[2]) ? "idx" : NULL;
}

/* That path names a dataset this user can reach, and o a split there is: its stat into *sb. With
 * no format given, detection reads the file or lists the directory, so one this user may not read
 * is refused here rather than called no dataset at all, with --data-format as the fix. */
static dt_status check_path(const char *path, const ds_open_opts *o, struct stat *sb)
{
    if (!path || !*path) return status_set_error(DT_ERR_INVALID_ARG, "no dataset path given");
    if (o->split && strcmp(o->split, "train") != 0 && strcmp(o->split, "test") != 0)
        return status_set_error(DT_ERR_INVALID_ARG, "split '%s' is not train or test", o->split);
    char advice[IO_FIX_LEN];
    if (stat(path, sb) != 0) {
        const int err = errno;
        if (err == ENOENT || err == ENOTDIR) return status_set_error(DT_ERR_IO, "dataset %s does not exist", path);
        /* A directory above it that this user may not search: the path is there, and "does not
         * exist" would send the user looking for a typo. */
        return status_set_error(DT_ERR_IO, "cannot reach dataset %s: %s: %s", path, strerror(err),
                                io_error_fix(err, "file", NULL, advice, sizeof advice));
    }
    const int forced = o->format && strcmp(o->format, "auto") != 0;
    if (!forced && access(path, S_ISDIR(sb->st_mode) ? R_OK | X_OK : R_OK) != 0) {
        const int err = errno;
        return status_set_error(DT_ERR_IO, "cannot read dataset %s: %s: %s", path, strerror(err),
                                io_error_fix(err, "file", NULL, advice, sizeof advice));
    }
    return DT_OK;
}

/* The format at path (sb its stat) by its layout or contents into *fmt; DT_ERR_INVALID_ARG saying
 * what was looked for when nothing is recognised. */
static dt_status detect_format(const char *path, const struct stat *sb, const char **fmt)
{
    *fmt = S_ISDIR(sb->st_mode) ? detect_dir(path) : detect_file(path, sb);
    if (!*fmt && !S_ISDIR(sb->st_mode))
        return status_set_error(DT_ERR_INVALID_ARG,
                                "%s is not a dataset file dtrain recognises: not IDX (it starts "
                                "00 00 <type> <rank>), not a .dts shard (it starts DTSHARD1), and not "
                                "whole CIFAR-10 or CIFAR-100 records (%lld bytes is "
                                "no multiple of 3073 or 3074); give --data-format to force a format",
                                path, (long long)sb->st_size);
    if (!*fmt)
        return status_set_error(
            DT_ERR_INVALID_ARG,
            "no dataset recognised in %s: looked for "
            "train-images-idx3-ubyte[.gz] (MNIST IDX), data_batch_1.bin (CIFAR-10), train.bin "
            "(CIFAR-100), train.dts (dtrain shard) and class folders (an image folder, ROOT/<class>/"
            "<image>.jpg|.png); give --data-format to force one",
            path);
    return DT_OK;
}

/* The reader of format fmt into *f, or DT_ERR_INVALID_ARG naming the formats there are. */
static dt_status find_format(const char *fmt, const format_entry **f)
{
    *f = NULL;
    for (size_t i = 0; i < sizeof formats / sizeof *formats; i++)
        if (strcmp(formats[i].name, fmt) == 0) *f = &formats[i];
    if (!*f)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "dataset format '%s' is not idx, cifar10, cifar100, "
                                "imagefolder, dts or auto",
                                fmt);
    return DT_OK;
}

/* After the open (st) of a folder detected as an image folder by its subfolders: st, or the error
 * for datasets in its "class folders". Stat-ing the marker names in each of ImageNet's 1000 class
 * folders costs 16 lookups a folder, 16 times the scan's own metadata work, on every rank's open.
 * So the check runs only where it can find something: when the open failed (a dataset is a class
 * without images, or --input is missing), when the scan met a marker's name in a class folder, or
 * in the split layout, whose few folders (train/, val/) the scan of one split does not list. A test
 * split asked of a flat folder (as training asks of every one) fails for having none, without a
 * look at its folders. */
static dt_status check_inside(const char *path, const ds_open_opts *o, const ds_split *s, dt_status st)
{
    const int split_layout = imagefolder_heldout_dir(path) != NULL;
    const int no_test = o->split && strcmp(o->split, "test") == 0 && !split_layout;
    if (split_layout || (st && !no_test) || (!st && imagefolder_marked(s))) {
        const dt_status in = refuse_datasets_inside(path);
        if (in) st = in;
    }
    return st;
}

dt_status ds_open(const char *path, const ds_open_opts *opts, ds_split **out)
{
    *out = NULL;
    ds_open_opts o = {0};
    if (opts) o = *opts;
    struct stat sb;
    dt_status st = check_path(path, &o, &sb);
    if (st) return st;
    const char *fmt = o.format && strcmp(o.format, "auto") != 0 ? o.format : NULL;
    /* An image folder found by its subfolders is checked for datasets inside them after its open
     * (check_inside), where the scan has listed them anyway. */
    int inside = 0;
    if (!fmt) {
        if ((st = detect_format(path, &sb, &fmt))) return st;
        inside = strcmp(fmt, "imagefolder") == 0;
    }
    const format_entry *f;
    if ((st = find_format(fmt, &f))) return st;
    ds_split *s = calloc(1, sizeof *s);
    if (!s) return status_set_error(DT_ERR_NOMEM, "out of memory opening %s", path);
    snprintf(s->format, sizeof s->format, "%s", f->name);
    snprintf(s->split, sizeof s->split, "%s", o.split ? o.split : "train");
    snprintf(s->source, sizeof s->source, "%s", path);
    o.format = f->name;
    st = f->open(path, &o, s);
    if (inside) st = check_inside(path, &o, s, st);
    if (st) {
        ds_close(s);
        return st;
    }
    *out = s;
    return DT_OK;
}

int ds_has_test_split(const char *path, const ds_open_opts *opts)
{
    /* The files that make each format's test split; an image folder's is val/ (or valid/,
     * validation/, test/) beside train/. Any one of them there is a test split, whole or not
     * (MNIST's labels without its images too). */
    static const struct {
        const char *file, *format;
    } tests[] = {
        {"t10k-images-idx3-ubyte", "idx"},
        {"t10k-labels-idx1-ubyte", "idx"},
        {"test_batch.bin", "cifar10"},
        {"test.bin", "cifar100"},
        {"test.dts", "dts"},
    };
    struct stat sb;
    if (!path || !*path || stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) return 0;
    const char *fmt = opts && opts->format && strcmp(opts->format, "auto") != 0 ? opts->format : detect_dir(path);
    if (!fmt) return 0;
    char p[4200], found[4200];
    if (strcmp(fmt, "imagefolder") == 0) return imagefolder_heldout_dir(path) != NULL;
    for (size_t i = 0; i < sizeof tests / sizeof *tests; i++)
        if (strcmp(tests[i].format, fmt) == 0 &&
            (size_t)snprintf(p, sizeof p, "%s/%s", path, tests[i].file) < sizeof p &&
            ds_find_file(p, found, sizeof found))
            return 1;
    return 0;
}

void ds_close(ds_split *s)
{
    if (!s) return;
    if (s->ops && s->ops->close) s->ops->close(s);
    free(s);
}
