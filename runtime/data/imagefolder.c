/*
 * imagefolder.c - torchvision's ImageFolder layout as a dataset format (reader.h):
 *
 *   ROOT/<class>/<image>           classes = the subdirectories of ROOT, sorted by strcmp (byte
 *   ROOT/<class>/<sub>/.../<image>   order, as Python sorts str); label = index in that order
 *   ROOT/train/<class>/... + ROOT/val/<class>/...   when both exist: split "train" and "test" (the
 *     held-out folder is the first of val/, valid/, validation/, test/ beside train/)
 *
 * As torchvision (datasets.folder.make_dataset), a class holds every image below its folder,
 * symlinked folders followed, ordered by (folder path, file name); images are the names ending in
 * .jpg, .jpeg or .png in any case; other files are ignored, and so are hidden ones (".*", which
 * torchvision would take: macOS "._x.jpg" files are not images) and anything that is not a
 * regular file (a FIFO never blocks a scan or a read). Files with another extension torchvision
 * reads (.webp, .bmp, .tif, .tiff, .ppm, .pgm) are skipped too, and said in a warning with their
 * counts: the sample count then differs from torchvision's. So are symlinks with an image's name
 * whose target is gone, the first one named (torchvision would fail reading them). An empty class folder is an error (as
 * in torchvision 0.10 and later) rather than a silently unused label.
 *
 * The scan keeps every image's path (relative to the split's folder) in one string arena with an
 * offset per image, and the first image of each class, so a 1.3-million-image ImageNet costs about
 * 60 MiB and one allocation per growth step, not one per file. read(i) reads the file and decodes
 * it at the --input shape (image_decode.c); it shares nothing writable, so loader threads call it
 * at once.
 */
#include "runtime/data/image_decode.h"
#include "runtime/data/imagefolder_scan.h"
#include "base/io_error.h"
#include "base/log.h"
#include "runtime/data/reader.h"
#include "base/status.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

static void if_free(if_impl *f)
{
    if (!f) return;
    free(f->names.p);
    free(f->cls);
    free(f->first);
    free(f->img);
    free(f->label_of);
    free(f);
}

/* ------------------------------------------------------------------ reading */

/* Reads the regular file at path whole (at most IF_MAX_FILE_BYTES) into *buf. */
static dt_status read_image_file(const char *path, unsigned char **buf, size_t *len)
{
    *buf = NULL;
    const int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    char advice[IO_FIX_LEN];
    if (fd < 0) {
        const int err = errno;
        return status_set_error(DT_ERR_IO, "cannot open image %s: %s: %s", path, strerror(err),
                                io_error_fix(err, "image", NULL, advice, sizeof advice));
    }
    struct stat sb;
    dt_status st = DT_OK;
    if (fstat(fd, &sb) != 0)
        st = status_set_error(DT_ERR_IO, "cannot stat image %s: %s", path, strerror(errno));
    else if (!S_ISREG(sb.st_mode))
        st = status_set_error(DT_ERR_IO,
                              "image %s is not a regular file (a FIFO or device?); replace it with the "
                              "image file",
                              path);
    else if ((uint64_t)sb.st_size > IF_MAX_FILE_BYTES)
        st = status_set_error(DT_ERR_CORRUPT,
                              "image %s is %lld bytes, more than the %u an image may be; shrink it, "
                              "remove it, or train with --bad-samples skip",
                              path, (long long)sb.st_size, IF_MAX_FILE_BYTES);
    const size_t n = st ? 0 : (size_t)sb.st_size;
    if (!st && !(*buf = malloc(n ? n : 1))) st = status_set_error(DT_ERR_NOMEM, "out of memory reading %s", path);
    size_t got = 0;
    while (!st && got < n) {
        const ssize_t r = read(fd, *buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            const int err = errno;
            st = status_set_error(DT_ERR_IO, "cannot read image %s: %s: %s", path, strerror(err),
                                  io_error_fix(err, "image", NULL, advice, sizeof advice));
        } else if (r == 0)
            st = status_set_error(DT_ERR_CORRUPT, "image %s ended after %zu of its %zu bytes (changed while read?)",
                                  path, got, n);
        else
            got += (size_t)r;
    }
    close(fd);
    if (st) {
        free(*buf);
        *buf = NULL;
        return st;
    }
    *len = n;
    return DT_OK;
}

static dt_status if_read(const ds_split *s, size_t i, float *x, int32_t *label)
{
    const if_impl *f = s->impl;
    /* The class folder: the last k with first[k] <= i. */
    int lo = 0, hi = f->nfolders - 1;
    while (lo < hi) {
        const int mid = lo + (hi - lo + 1) / 2;
        if (f->first[mid] <= i)
            lo = mid;
        else
            hi = mid - 1;
    }
    char path[IF_PATH_MAX];
    /* the scan refused longer paths */
    if ((size_t)snprintf(path, sizeof path, "%s/%s", f->root, f->names.p + f->img[i]) >= sizeof path)
        return status_set_error(DT_ERR_INTERNAL, "image path %s/%s too long", f->root, f->names.p + f->img[i]);
    unsigned char *buf = NULL;
    size_t len = 0;
    dt_status st = read_image_file(path, &buf, &len);
    if (st) return st;
    st = image_decode(path, buf, len, s->c, s->h, s->w, 0, x);
    free(buf);
    if (!st) *label = f->label_of ? f->label_of[lo] : lo;
    return st;
}

static void if_close(ds_split *s)
{
    if_free(s->impl);
    s->impl = NULL;
}

static const ds_ops if_ops = {if_read, if_close};

int imagefolder_sample_path(const ds_split *s, size_t i, char *out, size_t n)
{
    if (!s || s->ops != &if_ops || i >= s->count) return 0;
    const if_impl *f = s->impl;
    snprintf(out, n, "%s/%s", f->root, f->names.p + f->img[i]);
    return 1;
}

int imagefolder_marked(const ds_split *s)
{
    return s && s->ops == &if_ops && s->impl && ((const if_impl *)s->impl)->marked;
}

const char *imagefolder_class_name(const ds_split *s, int k)
{
    if (!s || s->ops != &if_ops || k < 0 || k >= s->classes) return NULL;
    const if_impl *f = s->impl;
    if (!f->label_of) return f->names.p + f->cls[k];
    /* Numbered by another split: the folder given label k, if this split has one. */
    for (int j = 0; j < f->nfolders; j++)
        if (f->label_of[j] == k) return f->names.p + f->cls[j];
    return NULL;
}

/* Numbers f's class folders (classes of them) as ref's sorted names (nref) do: label_of[k] = the
 * position of class k's name among them, so a held-out split that lacks some of training's classes
 * keeps training's labels (torchvision's ImageFolder would number it afresh). A class the reference
 * lacks fails, naming it: no label could mean it. */
static dt_status number_like(if_impl *f, const char *const *ref, int nref, const char *ref_where)
{
    const int classes = f->nfolders;
    int32_t *map = malloc((size_t)(classes ? classes : 1) * sizeof *map);
    if (!map) return imagefolder_nomem(f->root);
    for (int k = 0; k < classes; k++) {
        const char *name = f->names.p + f->cls[k];
        int lo = 0, hi = nref - 1, at = -1;
        while (lo <= hi) {
            const int mid = lo + (hi - lo) / 2, c = strcmp(ref[mid], name);
            if (c == 0) {
                at = mid;
                break;
            }
            if (c < 0)
                lo = mid + 1;
            else
                hi = mid - 1;
        }
        if (at < 0) {
            free(map);
            return status_set_error(DT_ERR_INVALID_ARG,
                                    "%s/%s is a class folder that %s does not have: the held-out data's classes "
                                    "must be training's (%d of them); remove it or add it to the training data",
                                    f->root, name, ref_where, nref);
        }
        map[k] = at;
    }
    free(f->label_of);
    f->label_of = map;
    return DT_OK;
}

dt_status imagefolder_number_like(ds_split *s, const ds_split *ref)
{
    if (!s || !ref || s->ops != &if_ops) return DT_OK;
    if (ref->ops != &if_ops) {
        /* ref has labels but no class names (a .dts, IDX or CIFAR set): the folders keep their
         * sorted order, the one `dtrain data convert` gives an image folder's labels. That is
         * training's numbering only when no class is missing: one missing shifts every later
         * label, and the held-out figures would be wrong without a word. */
        if (s->classes == ref->classes) return DT_OK;
        return status_set_error(
            DT_ERR_INVALID_ARG,
            "%s has %d class folders but the training set %s (%s) has %d classes and keeps no class names, so "
            "the folders cannot be matched to its labels by name (numbered in their sorted order, every label "
            "after a missing class would be another class's): give a held-out folder with all %d classes, convert "
            "it together with the training folder (dtrain data convert ROOT DST, ROOT holding train/ and val/, "
            "numbers val/ by train/'s names), or train on the image folder itself",
            ((const if_impl *)s->impl)->root, s->classes, ref->source, ref->format, ref->classes, ref->classes);
    }
    const if_impl *r = ref->impl;
    if (r->label_of)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "%s is numbered by another split's classes: number %s by the training split itself",
                                r->root, ((const if_impl *)s->impl)->root);
    const char **names = malloc((size_t)ref->classes * sizeof *names);
    if (!names) return status_set_error(DT_ERR_NOMEM, "out of memory for %d class names", ref->classes);
    for (int k = 0; k < ref->classes; k++) names[k] = r->names.p + r->cls[k];
    const dt_status st = number_like(s->impl, names, ref->classes, r->root);
    free(names);
    if (!st) s->classes = ref->classes;
    return st;
}

/* The held-out split ROOT/val numbered by ROOT/train's class folders (their names only). */
static dt_status number_like_train(if_impl *f, const char *path, int *classes)
{
    char train[IF_PATH_MAX];
    const size_t pl = strlen(path);
    if ((size_t)snprintf(train, sizeof train, "%.*s/train", (int)(pl > 1 && path[pl - 1] == '/' ? pl - 1 : pl), path) >=
        sizeof train)
        return status_set_error(DT_ERR_INVALID_ARG, "image folder path %s is longer than %d bytes", path, IF_PATH_MAX);
    arena names = {0};
    offs cls = {0};
    size_t ignored = 0;
    dt_status st = imagefolder_list_classes(train, &names, &cls, &ignored);
    const char **ref = st ? NULL : malloc(cls.n * sizeof *ref);
    if (!st && !ref) st = imagefolder_nomem(train);
    for (size_t k = 0; !st && k < cls.n; k++) ref[k] = names.p + cls.v[k];
    if (!st) st = number_like(f, ref, (int)cls.n, train);
    if (!st) *classes = (int)cls.n;
    free(ref);
    free(cls.v);
    free(names.p);
    return st;
}

/* ------------------------------------------------------------------ open */

static int is_dir(const char *root, const char *sub)
{
    char p[IF_PATH_MAX];
    struct stat sb;
    return (size_t)snprintf(p, sizeof p, "%s/%s", root, sub) < sizeof p && stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* The split layout's held-out folder beside ROOT/train, the first of these that exists (Kaggle's
 * and others' layouts name it valid/ or test/): imagefolder_heldout_dir (reader.h). */
static const char *const heldout_names[] = {"val", "valid", "validation", "test"};
enum { HELDOUT_NAMES = sizeof heldout_names / sizeof *heldout_names };

const char *imagefolder_heldout_dir(const char *root)
{
    if (!is_dir(root, "train")) return NULL;
    for (int i = 0; i < HELDOUT_NAMES; i++)
        if (is_dir(root, heldout_names[i])) return heldout_names[i];
    return NULL;
}

static int is_split_name(const char *name)
{
    if (!strcmp(name, "train")) return 1;
    for (int i = 0; i < HELDOUT_NAMES; i++)
        if (!strcmp(name, heldout_names[i])) return 1;
    return 0;
}

/* That path is an image folder and opts a shape and split it can give: its held-out folder's name
 * into *heldout (NULL: no split layout), *test for the test split. */
static dt_status check_request(const char *path, const ds_open_opts *opts, int *test, const char **heldout)
{
    if (!path || !*path) return status_set_error(DT_ERR_INVALID_ARG, "no image folder path given");
    const int c = opts ? opts->c : 0, h = opts ? opts->h : 0, w = opts ? opts->w : 0;
    if (c == 0 && h == 0 && w == 0)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "an image folder needs the shape to decode to: give --input 3x224x224 "
                                "(CxHxW; C = 3 for RGB or 1 for gray) for %s",
                                path);
    if ((c != 1 && c != 3) || h < 1 || w < 1 || h > IMG_MAX_SIDE || w > IMG_MAX_SIDE)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "--input %dx%dx%d cannot be the shape of images from %s: C must be 1 "
                                "(gray) or 3 (RGB), H and W 1..%d; e.g. --input 3x224x224",
                                c, h, w, path, IMG_MAX_SIDE);
    const char *split = opts && opts->split ? opts->split : "train";
    *test = strcmp(split, "test") == 0;
    if (!*test && strcmp(split, "train") != 0)
        return status_set_error(DT_ERR_INVALID_ARG, "split '%s' is not train or test", split);
    struct stat sb;
    if (stat(path, &sb) != 0) return status_set_error(DT_ERR_IO, "image folder %s does not exist", path);
    if (!S_ISDIR(sb.st_mode))
        return status_set_error(DT_ERR_INVALID_ARG,
                                "%s is not a folder: an image folder is ROOT/<class>/<image>.jpg; "
                                "point --data at ROOT",
                                path);
    *heldout = imagefolder_heldout_dir(path);
    if (*test && !*heldout)
        return status_set_error(DT_ERR_INVALID_ARG,
                                "no held-out split: %s has %s (ROOT/val/<class>/... is the test split, or "
                                "valid/, validation/ or test/ beside train/); use --eval-data PATH or --holdout F",
                                path,
                                is_dir(path, "train") ? "train/ but no val/, valid/, validation/ or test/ beside it"
                                                      : "no train/ folder");
    return DT_OK;
}

/* What the scan of f (count images in classes) passed over, said: images of other formats and
 * broken links as warnings on rank 0 (every rank scans the same folder), other entries at info. */
static void say_skipped(const if_impl *f, size_t count, int classes)
{
    char other[256] = "";
    size_t nother = 0;
    for (int i = 0; i < IF_OTHER_EXTS; i++) {
        if (!f->other_images[i]) continue;
        const size_t len = strlen(other);
        snprintf(other + len, sizeof other - len, "%s%s %zu", len ? ", " : "", imagefolder_other_exts[i],
                 f->other_images[i]);
        nother += f->other_images[i];
    }
    /* Said on rank 0 only: every rank scans the same folder. */
    if (nother)
        log_msg0(LOG_LEVEL_WARN,
                 "%s: %zu image file%s skipped (%s): dtrain reads JPEG and PNG only, where torchvision's "
                 "ImageFolder would read these too, so its sample count would be %zu, not %zu; convert them to "
                 "PNG or JPEG to train on them",
                 f->root, nother, nother == 1 ? "" : "s", other, count + nother, count);
    if (f->broken)
        log_msg0(LOG_LEVEL_WARN,
                 "%s: %zu image name%s %s symlink%s to nothing (the first: %s): skipped, so the sample count is %zu, "
                 "not %zu; fix the links (was the dataset they point into moved?) or remove them",
                 f->root, f->broken, f->broken == 1 ? "" : "s", f->broken == 1 ? "is a" : "are",
                 f->broken == 1 ? "" : "s", f->broken_first, count, count + f->broken);
    if (f->ignored)
        log_msg(LOG_LEVEL_INFO,
                "%s: %zu images in %d classes; %zu other entries ignored (not .jpg/.jpeg/.png "
                "regular files, or hidden)",
                f->root, count, classes, f->ignored);
}

dt_status imagefolder_open(const char *path, const ds_open_opts *opts, ds_split *s)
{
    int test = 0;
    const char *heldout = NULL;
    const dt_status bad = check_request(path, opts, &test, &heldout);
    if (bad) return bad;
    /* opts is not NULL here: check_request refuses a request without a shape. */
    const int c = opts->c, h = opts->h, w = opts->w, split_dirs = heldout != NULL;
    const char *split = opts->split ? opts->split : "train";
    if_impl *f = calloc(1, sizeof *f);
    if (!f) return status_set_error(DT_ERR_NOMEM, "out of memory opening %s", path);
    const size_t pl = strlen(path);
    const int n = snprintf(f->root, sizeof f->root, "%.*s%s%s", (int)(pl > 1 && path[pl - 1] == '/' ? pl - 1 : pl),
                           path, split_dirs ? "/" : "", split_dirs ? (test ? heldout : "train") : "");
    if (n < 0 || (size_t)n >= sizeof f->root) {
        if_free(f);
        return status_set_error(DT_ERR_INVALID_ARG, "image folder path %s is longer than %d bytes", path, IF_PATH_MAX);
    }
    int classes = 0;
    size_t count = 0;
    dt_status st = imagefolder_scan(f, &classes, &count);
    if (!st && test) st = number_like_train(f, path, &classes);
    /* ROOT/train alone (or ROOT/val) would read as one class named "train" of all its images. */
    if (!st && classes == 1 && !test && is_split_name(f->names.p + f->cls[0]))
        st = status_set_error(DT_ERR_INVALID_ARG,
                              "%s holds only a %s/ folder, which would be one class of all its images: the split "
                              "layout needs %s/train and beside it %s/val (or valid/, validation/, test/); or point "
                              "--data at %s/%s",
                              path, f->names.p + f->cls[0], path, path, path, f->names.p + f->cls[0]);
    if (st) {
        if_free(f);
        return st;
    }
    say_skipped(f, count, classes);
    s->ops = &if_ops;
    s->impl = f;
    s->count = count;
    s->c = c, s->h = h, s->w = w;
    s->classes = classes;
    s->uint8_values = 1;
    snprintf(s->format, sizeof s->format, "imagefolder");
    if (!s->split[0]) snprintf(s->split, sizeof s->split, "%s", split);
    if (!s->source[0]) snprintf(s->source, sizeof s->source, "%s", path);
    return DT_OK;
}
