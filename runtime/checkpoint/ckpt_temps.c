/*
 * ckpt_temps.c - the atomic writers' temporary files in flight (ckpt_temps.h). A few fixed slots
 * rather than a list: a signal handler walks them without a lock, and a process writes one file
 * at a time in practice (the checkpoint, the dump, the trace each on the main thread; a library
 * caller's own threads may add a few).
 */
#include "runtime/checkpoint/ckpt_temps.h"

#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

enum { TEMP_SLOTS = 4, TEMP_NAME_MAX = 4400 };
enum { SLOT_FREE, SLOT_FILLING, SLOT_SET, SLOT_REMOVING };

/* Lock-free atomics are async-signal-safe; the name is complete before its slot reads SET. */
static atomic_int slot_state[TEMP_SLOTS];
static char slot_name[TEMP_SLOTS][TEMP_NAME_MAX];

int ckpt_temp_note(const char *tmp)
{
    const size_t len = strlen(tmp);
    if (len >= TEMP_NAME_MAX) return -1;
    for (int k = 0; k < TEMP_SLOTS; k++) {
        int expected = SLOT_FREE;
        if (!atomic_compare_exchange_strong(&slot_state[k], &expected, SLOT_FILLING)) continue;
        memcpy(slot_name[k], tmp, len + 1);
        atomic_store(&slot_state[k], SLOT_SET);
        return k;
    }
    return -1;
}

void ckpt_temp_forget(int slot)
{
    if (slot >= 0 && slot < TEMP_SLOTS) atomic_store(&slot_state[slot], SLOT_FREE);
}

void ckpt_temps_remove(void)
{
    /* Each slot is claimed before its name is read: a thread that renamed its file and forgot the
     * slot cannot note a new name into it while unlink reads this one (a torn name). The slot
     * stays claimed, as the process is ending: its owner's forget frees it, and only it. */
    for (int k = 0; k < TEMP_SLOTS; k++) {
        int expected = SLOT_SET;
        if (atomic_compare_exchange_strong(&slot_state[k], &expected, SLOT_REMOVING)) unlink(slot_name[k]);
    }
}
