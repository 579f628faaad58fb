/*
 * ckpt_lock.h - one run at a time in a checkpoint directory (ckpt_lock.c): `dtrain train` takes
 * the directory's lock before it cleans or writes anything there.
 */
#ifndef DT_RUNTIME_CHECKPOINT_CKPT_LOCK_H
#define DT_RUNTIME_CHECKPOINT_CKPT_LOCK_H

#include "dtrain.h"

/* The lock file's name in the directory; left there after a run (an empty lock is harmless). */
#define CKPT_LOCK_NAME ".dtrain.lock"
/* How long a run waits for a lock that a process on another node holds: a job requeued after its
 * node crashed starts while the file server still keeps the dead node's lock, until the lease
 * (NFSv4's default 90 s) ends; a live run elsewhere is still refused, only later. */
#define CKPT_LOCK_WAIT_ELSEWHERE_S 120

/* Takes the write lock of dir/.dtrain.lock (made with mode 0666 less the umask, never through a
 * symbolic link) and records "pid P on HOST since TIME" in it. The lock lasts until *fd is closed
 * or the process ends, whichever way (a killed run leaves no stale lock). dir must exist. *fd: the
 * lock's descriptor, or -1 where no lock was taken though the run may go on (a file system without
 * locks: said at info level; another user's unwritable lock file that no run holds: a warning).
 * A lock held by a process on another node (the file's line names its host) is waited for, up to
 * CKPT_LOCK_WAIT_ELSEWHERE_S, saying so: a node that crashed keeps its lock until its file server's lease ends.
 * DT_ERR_IO when another process holds the lock (the message names dir, the holder and the fix) or
 * the file cannot be opened (naming it, the cause and the fix); DT_ERR_INVALID_ARG: a name too
 * long. Local: rank 0 calls it. */
dt_status ckpt_dir_lock(const char *dir, int *fd);

/* Whether a process holds dir's lock now (doctor's question: would ckpt_dir_lock refuse?), asked
 * with F_GETLK/F_OFD_GETLK without taking it or making the lock file. *held 1: *who (n bytes) gets
 * the holder's line from the file, "pid P on HOST since TIME" (or "another process"); *held 0: no
 * lock file yet or none held, *who empty, or why a second run would go undetected (a file system
 * without locks). DT_ERR_IO where the file cannot be opened (a symbolic link, no permission: the
 * message is ckpt_dir_lock's, naming it and the fix); DT_ERR_INVALID_ARG: a name too long. */
dt_status ckpt_dir_lock_query(const char *dir, int *held, char *who, size_t n);

/* Whether a holder's line ("pid P on HOST since TIME") names another host than this one: the case
 * ckpt_dir_lock waits for. 0 for any other line. */
int ckpt_lock_held_elsewhere(const char *who);

#endif
