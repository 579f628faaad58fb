/*
 * ckpt_temps.h - the temporary files this process's atomic writers have open now (ckpt_temps.c),
 * so that a signal that ends the process at once (a second Ctrl-C) takes them along: each is a
 * partial file under a name no reader takes (FILE.tmp.<pid>), which would otherwise stay beside
 * the user's --dump-params file or --trace, or in the checkpoint directory until the next run.
 */
#ifndef DT_RUNTIME_CHECKPOINT_CKPT_TEMPS_H
#define DT_RUNTIME_CHECKPOINT_CKPT_TEMPS_H

/* Notes tmp, a temporary file just made, until ckpt_temp_forget(slot). The slot, or -1 when the
 * few slots are all taken by other threads' writes (that file is then not removed on a signal)
 * or the name is too long. Thread-safe. */
int ckpt_temp_note(const char *tmp);
/* The file of slot (from ckpt_temp_note; -1 does nothing) is renamed or removed: forget it. */
void ckpt_temp_forget(int slot);
/* Removes every noted file. Async-signal-safe (unlink only): for a handler about to end the
 * process. The writes in progress then fail, which does not matter as the process ends. */
void ckpt_temps_remove(void);

#endif
