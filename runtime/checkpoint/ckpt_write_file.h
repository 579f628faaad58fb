/*
 * ckpt_write_file.h - the checkpoint's atomic file writer, for any file that a crash must never
 * leave half written (ckpt_write_file.c; the checkpoint itself goes through ckpt_write_atomic), and
 * where a write of a path goes (ckpt_write_target.c).
 */
#ifndef DT_RUNTIME_CHECKPOINT_CKPT_WRITE_FILE_H
#define DT_RUNTIME_CHECKPOINT_CKPT_WRITE_FILE_H

#include "runtime/checkpoint/ckpt_format.h"

#include <stddef.h>
#include <stdio.h>

/* One run of bytes of a file, written in order. */
typedef struct ckpt_part {
    const void *data;
    size_t bytes;
} ckpt_part;

/* Writes the n parts in order to path so that a crash, a full disk, a quota or a file-size limit
 * leaves the old file or the new one at path, never part of one: a temporary file of its own
 * (ckpt_open_temp) is written, fsynced and renamed onto path, then the directory is fsynced. The directory must exist. what
 * names the file in messages ("checkpoint"), alt what the user can change instead
 * ("--checkpoint-dir"). DT_ERR_IO names the file, the cause and the fix (the temporary file is
 * then removed); DT_ERR_INVALID_ARG: a path too long for the temporary name. */
dt_status ckpt_write_file_atomic(const char *path, const char *what, const char *alt, const ckpt_part *parts, size_t n);
/* The same, saying beat (NULL: nothing) while it writes. */
dt_status ckpt_write_file_beating(const char *path, const char *what, const char *alt, const ckpt_part *parts, size_t n,
                                  const ckpt_beat *beat);

/* Makes the writer's temporary file for path: path.tmp.<pid>, or path.tmp.<pid>.<k> when that name
 * is taken (a killed job's left-over file, another node's process with the same pid, a planted
 * link: never opened), created with O_EXCL and mode 0666 less the umask; its name into tmp (n
 * bytes). The fd, open for writing, or -1 with errno (ENAMETOOLONG: tmp too small). */
int ckpt_open_temp(const char *path, char *tmp, size_t n);
/* The same with another stem than ".tmp." between path and the pid (path<stem><pid>[.<k>]), for a
 * writer whose temporary files have names of their own (gnuplot's PNGs: ".tmp-"). */
int ckpt_open_temp_as(const char *path, const char *stem, char *tmp, size_t n);

/* Runs fn(arg), a call that may block for long (an fsync, a directory sync), on a thread of its
 * own while the calling thread says beat (when not NULL) at once and then every 50 ms, for at most
 * limit_s seconds of the call (longer is taken as stuck: the beat falls silent so the waiting
 * ranks' deadline can end the job). Returns as soon as fn does (no polling delay), with fn's
 * result and its errno. Without a beat, or when no thread can be made, fn runs on this thread. */
int ckpt_call_beating(int (*fn)(void *), void *arg, const ckpt_beat *beat, double limit_s);

/* Where a write of path goes: path itself, and *in_place 1, when it exists and is not a file to
 * replace: a device, a FIFO, a name under /dev or /proc (/dev/stdout, /dev/fd/N: someone's open
 * stream), or this process's stdout or stderr (a rename would put a regular file in its place, or
 * unlink the job's log); the file a link leads to (copied into real, n bytes) when path is a link
 * of this user's (or root's) to a file, so the file is replaced and the link stays; else path,
 * another user's link included (ckpt_link_foreign: the rename replaces the link, never its target). */
const char *ckpt_write_target(const char *path, char *real, size_t n, int *in_place);
/* Opens an in-place target for writing as a stdio stream, appending (a log that is also another
 * process's output keeps its lines); this process's own stdout or stderr is written through a copy
 * of its descriptor (its stdio buffer flushed first), whose offset the stream shares, so neither
 * overwrites the other. A FIFO that no process reads fails with EPIPE (said as a broken pipe)
 * rather than blocking. NULL with errno. */
FILE *ckpt_fopen_in_place(const char *path);
/* The same as a descriptor (-1 with errno; a FIFO that no process reads: ENXIO). */
int ckpt_open_in_place(const char *path);
/* 1 when path is a symbolic link owned by another user than this one and root (its uid into
 * *owner when not NULL): a link planted in a shared directory, which no writer follows. */
int ckpt_link_foreign(const char *path, unsigned *owner);

/* Before a run that writes path at its end (through ckpt_write_file_atomic or path.tmp): path must
 * be a file name, not a directory, in a directory where this process can make the temporary file,
 * so a bad path stops the run before it works rather than after. flag names it in messages
 * ("--dump-params"). DT_ERR_IO naming the path, the cause and the fix; DT_ERR_INVALID_ARG: an
 * empty path or one too long. Nothing is left behind. */
dt_status ckpt_write_file_try(const char *path, const char *flag);

/* Before a run that saves into dir: dir is made (its parent must exist; mode 0777 less the umask)
 * and must be a directory this process can write in, so a bad --checkpoint-dir stops the run
 * before it trains; its lock is taken (ckpt_dir_lock: *lock_fd, kept open for the run), so a
 * second run given the same dir is refused; then the temporary files of saves that a crash or a
 * kill interrupted (regular files named ckpt-*.dtc.tmp.*) are removed. DT_ERR_IO naming dir, the
 * cause and the fix (a dir that another run holds among them). */
dt_status ckpt_dir_prepare(const char *dir, int *lock_fd);
/* ckpt_dir_prepare's checks without its changes (for dtrain doctor): an existing dir must be a
 * directory this process can write in; a missing one, a directory that mkdir could make (its
 * parent a directory this process can write in). *exists says which. The same errors. */
dt_status ckpt_dir_check(const char *dir, int *exists);

#endif
