/*
 * fuzz_ckpt_roundtrip.c - the checkpoint writers and readers together (runtime/checkpoint/): any
 * state dt_checkpoint_save or dt_ckpt_commit accepts reads back bit for bit, through the file
 * reader and the directory's newest, and written again from what was read is the same file byte
 * for byte; the writer refuses exactly the states the readers would refuse, naming the value, and
 * leaves no file or temporary. The input's layout and every check are tests/unit/ckpt_roundtrip.h's,
 * which the seeded unit test (test_checkpoint.c) runs too.
 */
#include "fuzz_common.h"
#include "tests/unit/ckpt_roundtrip.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char dir[64];
    fuzz_scratch_dir(dir, sizeof dir, "ckpt-roundtrip");
    char msg[1024];
    FUZZ_CHECK(ckpt_rt_check(data, size, dir, msg, sizeof msg, NULL) == 0, "%s", msg);
    return 0;
}
