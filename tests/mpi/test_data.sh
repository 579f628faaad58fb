#!/usr/bin/env bash
# `dtrain data info`: what a dataset holds, on files this test writes byte by byte (an MNIST-style
# IDX directory, a CIFAR-10 batch), and the refusal of damaged ones naming the file.
here=$(dirname "$0"); source "$here/lib.sh"
DTRAIN=$1

# IDX: 3 images of 2x2 (ubyte) with labels 0, 1, 1; a test split of 1 image, gzip-compressed.
d="$tmp/mnist"
mkdir -p "$d"
printf '\x00\x00\x08\x03\x00\x00\x00\x03\x00\x00\x00\x02\x00\x00\x00\x02\x00\x10\x20\x30\x40\x50\x60\x70\x80\x90\xa0\xff' \
    >"$d/train-images-idx3-ubyte"
printf '\x00\x00\x08\x01\x00\x00\x00\x03\x00\x01\x01' >"$d/train-labels-idx1-ubyte"
printf '\x00\x00\x08\x03\x00\x00\x00\x01\x00\x00\x00\x02\x00\x00\x00\x02\x01\x02\x03\x04' | gzip >"$d/t10k-images-idx3-ubyte.gz"
printf '\x00\x00\x08\x01\x00\x00\x00\x01\x01' | gzip >"$d/t10k-labels-idx1-ubyte.gz"
"$DTRAIN" data info "$d" >"$tmp/out" 2>&1
rc=$?
# Values 0x00, 0x10, ..., 0xa0 and 0xff: min 0, max 255, mean 1135/12 = 94.58.
if [ $rc -eq 0 ] && grep -q "^dataset $d: idx$" "$tmp/out" &&
    grep -q "train: 3 samples of 1x2x2 (4 values), 2 classes" "$tmp/out" &&
    grep -q "values: min 0, max 255; per channel mean / std: 94.58 / 68.45" "$tmp/out" &&
    grep -q "samples per class: 0: 1, 1: 2$" "$tmp/out" &&
    grep -q "test: 1 sample of 1x2x2 (4 values), 2 classes" "$tmp/out"; then
    ok "data info on an IDX directory: splits, shape, classes, range, mean, per-class counts"
else
    bad "data info on an IDX directory: exit $rc"; cat "$tmp/out"
fi

# CIFAR-10: one test batch of 2 records (label, 3072 pixels), detected by its size.
c="$tmp/cifar"
mkdir -p "$c"
{ printf '\x07'; head -c 3072 /dev/zero; printf '\x03'; head -c 3072 /dev/zero | tr '\0' '\377'; } >"$c/test_batch.bin"
expect 0 "train: 2 samples of 3x32x32 (3072 values), 10 classes" "$DTRAIN" data info "$c/test_batch.bin"
grep -q "values: min 0, max 255; per channel mean / std: 127.5 / 127.5 127.5 / 127.5 127.5 / 127.5" "$tmp/out" &&
    ok "CIFAR-10 channels: mean 127.5, std 127.5 each" || { bad "CIFAR channel statistics"; cat "$tmp/out"; }
grep -q "samples per class: 0: 0, 1: 0, 2: 0, 3: 1, 4: 0, 5: 0, 6: 0, 7: 1, 8: 0, 9: 0; 8 classes without a sample" "$tmp/out" &&
    ok "labels 7 and 3 counted, 8 classes without a sample" || { bad "per-class counts"; cat "$tmp/out"; }
# Over 20 classes the counts are summed up by the fewest and the most (CIFAR-100: fine labels 5, 7, 7).
{ for l in 5 7 7; do printf "\\x01\\x0$l"; head -c 3072 /dev/zero; done; } >"$tmp/c100.bin"
expect 0 "samples per class: fewest 0 (class 0), most 2 (class 7); 98 classes without a sample" \
    "$DTRAIN" data info --data-format cifar100 "$tmp/c100.bin"

# convert: the IDX directory -> a directory of train.dts + test.dts, which info reads with the same
# counts and statistics (and the ones stored in the header), and verify checks whole.
"$DTRAIN" data info "$d" | grep -v "^dataset" >"$tmp/idx.info"
expect 0 "wrote $tmp/shards/test.dts: 1 sample of 1x2x2 uint8, 2 classes, 196 bytes" \
    "$DTRAIN" data convert --threads 2 "$d" "$tmp/shards"
grep -q "wrote $tmp/shards/train.dts: 3 samples of 1x2x2 uint8, 2 classes, 204 bytes" "$tmp/out" &&
    ok "convert wrote train.dts (3 samples, 204 bytes) beside test.dts" || { bad "convert train.dts"; cat "$tmp/out"; }
# The shards' mode is the umask's (0666 less it), as checkpoints' are: a group's project space.
(umask 002 && "$DTRAIN" data convert --split test "$d" "$tmp/group.dts" >/dev/null 2>&1)
[ "$(stat -c %a "$tmp/group.dts" 2>/dev/null)" = 664 ] && ok "convert under umask 002 writes a 664 shard" ||
    bad "convert under umask 002 wrote mode $(stat -c %a "$tmp/group.dts" 2>&1)"
(umask 002 && "$DTRAIN" data convert --split train "$d" "$tmp/groupdir" >/dev/null 2>&1)
[ "$(stat -c %a "$tmp/groupdir" 2>/dev/null)" = 775 ] && ok "convert under umask 002 makes a 775 directory" ||
    bad "convert under umask 002 made a directory of mode $(stat -c %a "$tmp/groupdir" 2>&1)"
"$DTRAIN" data info "$tmp/shards" >"$tmp/dts.info" 2>&1
if grep -q "^dataset $tmp/shards: dts$" "$tmp/dts.info" &&
    grep -q "stored in the file, mean / std: 94.58 / 68.45" "$tmp/dts.info" &&
    grep -v -e "^dataset" -e "stored in the file" "$tmp/dts.info" | cmp -s - "$tmp/idx.info"; then
    ok "data info of the .dts shards: the IDX directory's counts, range and mean/std, stored ones equal"
else
    bad "data info of the .dts shards differs from the IDX directory's"; diff "$tmp/idx.info" "$tmp/dts.info"
fi
expect 0 "OK: 4 samples checked" "$DTRAIN" data verify "$tmp/shards"
grep -q "train: OK, 3 samples of 1x2x2 read, every label in 0..1, every value finite, payload CRC-32 matches" \
    "$tmp/out" && ok "verify read the train shard and its CRC" || { bad "verify train"; cat "$tmp/out"; }
expect 0 "OK: 4 samples checked" "$DTRAIN" data verify "$d"
# A test split that is there but does not open is an error, not "test: none": verify and info
# report the train split, then name the test split's file and fail; convert writes nothing (unless
# --split train); no test split at all is fine and said. broken_test NAME DIR WANT: the three
# commands on DIR, whose test split fails saying WANT.
broken_test() {
    local name=$1 dir=$2 want=$3
    shift 3
    expect 1 "$dir has a test split, and it does not open: " "$DTRAIN" data verify "$@" "$dir"
    if grep -qF -- "$want" "$tmp/out" && grep -q "^  train: OK, " "$tmp/out" && ! grep -q -e "^OK" -e "test: none" "$tmp/out"; then
        ok "$name: verify reports the train split, then fails on the test split's $want"
    else
        bad "$name: verify of a broken test split"; cat "$tmp/out"
    fi
    expect 1 "$dir has a test split, and it does not open: " "$DTRAIN" data info "$@" "$dir"
    grep -qF -- "$want" "$tmp/out" && grep -q "^  train: [0-9]* samples" "$tmp/out" && ! grep -q "test: none" "$tmp/out" &&
        ok "$name: info reports the train split, then fails on the test split" || { bad "$name: info"; cat "$tmp/out"; }
    expect 1 "nothing was written; give --split train to convert the train split alone" \
        "$DTRAIN" data convert "$@" "$dir" "$tmp/conv.$name"
    [ ! -e "$tmp/conv.$name" ] && ok "$name: convert wrote nothing" || bad "$name: convert wrote $(ls "$tmp/conv.$name")"
    expect 0 "wrote $tmp/conv.$name/train.dts" "$DTRAIN" data convert --split train "$@" "$dir" "$tmp/conv.$name"
}
# IDX: the test labels file cut short.
mkdir -p "$tmp/idxcut" && cp "$d"/* "$tmp/idxcut/" && rm "$tmp/idxcut/t10k-labels-idx1-ubyte.gz"
printf '\x00\x00\x08\x01\x00\x00\x00\x01' >"$tmp/idxcut/t10k-labels-idx1-ubyte"
broken_test idx "$tmp/idxcut" "t10k-labels-idx1-ubyte is 8 bytes; its header (8 bytes) describes 1 bytes of values (truncated)"
# CIFAR-10: a test_batch.bin of no whole number of records.
mkdir -p "$tmp/cifarcut"
for i in 1 2 3 4 5; do { printf "\\x0$i"; head -c 3072 /dev/zero; } >"$tmp/cifarcut/data_batch_$i.bin"; done
# A batch cut short at a record boundary passes every check but its record count: said.
expect 0 "$tmp/cifarcut/data_batch_3.bin holds 1 record where CIFAR-10's data_batch_3.bin holds 10000: cut short" \
    "$DTRAIN" data info --data-format cifar10 "$tmp/cifarcut"
head -c 3000 /dev/zero >"$tmp/cifarcut/test_batch.bin"
broken_test cifar "$tmp/cifarcut" "$tmp/cifarcut/test_batch.bin is 3000 bytes"
# An image folder whose val/ holds a class folder that train/ has not.
python3 "$here/make_images.py" "$tmp/ifval/train" 2 2
python3 "$here/make_images.py" "$tmp/ifval/val" 1 3
broken_test imagefolder "$tmp/ifval" "$tmp/ifval/val/class2 is a class folder that $tmp/ifval/train does not have" \
    --input 3x8x8
# No test split at all: said, and verify passes.
mkdir -p "$tmp/notest" && cp "$d"/train-* "$tmp/notest/"
expect 0 "test: none ($tmp/notest has no test split: $tmp/notest/t10k-images-idx3-ubyte[.gz] is missing)" \
    "$DTRAIN" data verify "$tmp/notest"
grep -q "^OK: 3 samples checked$" "$tmp/out" && ok "verify without a test split: OK" || { bad "verify notest"; cat "$tmp/out"; }
expect 2 "$tmp/shards/train.dts exists: give --force" "$DTRAIN" data convert "$d" "$tmp/shards"
expect 0 "wrote $tmp/shards/train.dts" "$DTRAIN" data convert --force "$d" "$tmp/shards"
mkdir -p "$tmp/onlytest" && cp "$tmp/shards/test.dts" "$tmp/onlytest/"
# Refused before any split is read and written (a large set would take hours, then be refused).
expect 2 "$tmp/onlytest/test.dts exists: give --force" "$DTRAIN" data convert "$d" "$tmp/onlytest"
! grep -q "^converting" "$tmp/out" && ok "a lone test.dts is refused before any writing" || { bad "onlytest"; cat "$tmp/out"; }
: >"$tmp/afile"
expect 2 "$tmp/afile is a file and not a directory" "$DTRAIN" data convert "$d" "$tmp/afile"
# A convert into a directory is all or nothing. The room for both splits (204 + 196 bytes) is checked
# before either is written (DTRAIN_TEST_DTS_FREE fakes the free space); a second split that fails
# (DTRAIN_TEST_DTS_ENOSPC=2: its write meets a full disk) leaves the directory as it was: a new one
# gone, an existing one empty, an earlier pair under --force byte for byte the old one.
expect 1 "need 400 bytes and its filesystem has 399 free; nothing was written" \
    env DTRAIN_TEST_DTS_FREE=399 "$DTRAIN" data convert "$d" "$tmp/room"
[ ! -e "$tmp/room" ] && ok "no room for both splits: nothing written" || bad "no room: left $(ls -A "$tmp/room")"
# Exactly the room they need is enough.
expect 0 "wrote $tmp/room/test.dts" env DTRAIN_TEST_DTS_FREE=400 "$DTRAIN" data convert "$d" "$tmp/room"
# The room is that of the --dtype written: 2 CIFAR samples take 6280 bytes as uint8, 24712 as fp32.
expect 1 "$tmp/room32/train.dts needs 24712 bytes and its filesystem has 6280 free" \
    env DTRAIN_TEST_DTS_FREE=6280 "$DTRAIN" data convert --dtype fp32 "$c/test_batch.bin" "$tmp/room32"
expect 1 "cannot write $tmp/half/.test.dts.tmp." env DTRAIN_TEST_DTS_ENOSPC=2 "$DTRAIN" data convert "$d" "$tmp/half"
grep -q "nothing was put into $tmp/half" "$tmp/out" && [ ! -e "$tmp/half" ] &&
    ok "the test split's write failed: no train.dts, no directory left" || { bad "half convert: left $(ls -A "$tmp/half")"; cat "$tmp/out"; }
mkdir "$tmp/half" && cp -r "$tmp/shards" "$tmp/shards.old"
expect 1 "No space left on device" env DTRAIN_TEST_DTS_ENOSPC=2 "$DTRAIN" data convert "$d" "$tmp/half"
[ -d "$tmp/half" ] && [ -z "$(ls -A "$tmp/half")" ] && ok "into an existing directory: it stays empty" ||
    bad "half convert into a directory left $(ls -A "$tmp/half")"
expect 1 "No space left on device" env DTRAIN_TEST_DTS_ENOSPC=2 "$DTRAIN" data convert --force --dtype fp32 "$d" "$tmp/shards"
[ "$(ls -A "$tmp/shards")" = "$(printf 'test.dts\ntrain.dts')" ] && cmp -s "$tmp/shards/train.dts" "$tmp/shards.old/train.dts" &&
    cmp -s "$tmp/shards/test.dts" "$tmp/shards.old/test.dts" && ok "--force over a pair: the old pair stays whole" ||
    bad "--force over a pair changed it: $(ls -lA "$tmp/shards")"
# The renames themselves (commit_all), through strace's fault injection: test.dts goes in first, so
# a crash between the two leaves a test.dts that no command reads as a dataset, never a train.dts
# that reads as a set without its test split; a second rename that fails takes a new test.dts back
# out, and over an earlier pair (--force) says that the new test.dts is beside the old train.dts; a
# SIGTERM at the first rename waits for the second.
renames=rename,renameat,renameat2
at_rename() { traced -e trace=$renames -e inject=$renames:"$1" -- "${@:2}"; }
if can_trace; then
    at_rename error=EIO:signal=KILL:when=2 "$DTRAIN" data convert "$d" "$tmp/torn" >"$tmp/out" 2>&1
    [ -e "$tmp/torn/test.dts" ] && [ ! -e "$tmp/torn/train.dts" ] && ok "killed between the renames: test.dts alone" ||
        { bad "killed between the renames: left $(ls -A "$tmp/torn" | tr '\n' ' ')"; cat "$tmp/out"; }
    expect 1 "$tmp/torn has no train split: $tmp/torn/train.dts is missing" "$DTRAIN" data info "$tmp/torn"
    expect 2 "$tmp/torn/test.dts exists: give --force" "$DTRAIN" data convert "$d" "$tmp/torn"
    expect 0 "wrote $tmp/torn/train.dts" "$DTRAIN" data convert --force "$d" "$tmp/torn"
    cmp -s "$tmp/torn/train.dts" "$tmp/shards.old/train.dts" && cmp -s "$tmp/torn/test.dts" "$tmp/shards.old/test.dts" &&
        ok "the convert again with --force: the whole pair" || bad "the convert again with --force: not the pair"
    expect 1 "removed the new $tmp/undo/test.dts again: nothing was written" \
        at_rename error=EACCES:when=2 "$DTRAIN" data convert "$d" "$tmp/undo"
    [ ! -e "$tmp/undo" ] && ok "the second rename failed: the new test.dts and the directory gone" ||
        bad "the second rename failed: left $(ls -A "$tmp/undo" | tr '\n' ' ')"
    cp -r "$tmp/shards.old" "$tmp/pair"
    expect 1 "$tmp/pair/test.dts is the new one already, beside the old $tmp/pair/train.dts" \
        at_rename error=EACCES:when=2 "$DTRAIN" data convert --force --dtype fp32 "$d" "$tmp/pair"
    cmp -s "$tmp/pair/train.dts" "$tmp/shards.old/train.dts" && ! cmp -s "$tmp/pair/test.dts" "$tmp/shards.old/test.dts" &&
        [ "$(ls -A "$tmp/pair" | tr '\n' ' ')" = "test.dts train.dts " ] &&
        ok "--force, the second rename failed: the new test.dts beside the old train.dts, no file lost" ||
        bad "--force, the second rename failed: $(ls -lA "$tmp/pair")"
    # Over a lone train.dts (--force), a failed second rename takes the new test.dts back out: it
    # replaced nothing, and the old train.dts stays.
    mkdir "$tmp/lone" && cp "$tmp/shards.old/train.dts" "$tmp/lone/"
    expect 1 "removed the new $tmp/lone/test.dts again: nothing was written" \
        at_rename error=EACCES:when=2 "$DTRAIN" data convert --force --dtype fp32 "$d" "$tmp/lone"
    [ "$(ls -A "$tmp/lone")" = train.dts ] && cmp -s "$tmp/lone/train.dts" "$tmp/shards.old/train.dts" &&
        ok "--force over a lone train.dts, the second rename failed: as it was" || bad "lone: $(ls -lA "$tmp/lone")"
    at_rename signal=TERM:when=1 "$DTRAIN" data convert "$d" "$tmp/held" >"$tmp/out" 2>&1
    rc=$?
    [ $rc -eq 143 ] && cmp -s "$tmp/held/train.dts" "$tmp/shards.old/train.dts" &&
        cmp -s "$tmp/held/test.dts" "$tmp/shards.old/test.dts" && ok "SIGTERM at the first rename: exit 143 after both" ||
        { bad "SIGTERM at the first rename: exit $rc, left $(ls -A "$tmp/held" | tr '\n' ' ')"; cat "$tmp/out"; }
else
    ok "the renames under fault injection: SKIP: no strace that can trace here"
fi
# A source without a test split into a directory holding an earlier test.dts: refused without
# --force (it would be read as the new train.dts' test split); with --force removed, saying so.
cp -r "$tmp/shards" "$tmp/stale"
rm "$tmp/stale/train.dts"
expect 2 "$tmp/stale/test.dts exists from an earlier conversion and $tmp/notest has no test split" \
    "$DTRAIN" data convert "$tmp/notest" "$tmp/stale"
[ -e "$tmp/stale/test.dts" ] && [ ! -e "$tmp/stale/train.dts" ] && ok "refused: nothing written or removed" ||
    bad "the refused convert changed $tmp/stale: $(ls "$tmp/stale")"
expect 0 "removed $tmp/stale/test.dts: it was left from an earlier conversion, and $tmp/notest has no test split" \
    "$DTRAIN" data convert --force "$tmp/notest" "$tmp/stale"
grep -qF "test: none ($tmp/notest has no test split" "$tmp/out" && ok "convert said: test: none" || bad "convert: no 'test: none'"
[ "$(ls "$tmp/stale")" = train.dts ] && ok "--force left train.dts alone in the directory" || bad "left: $(ls "$tmp/stale")"
# cut_convert SIG DIR: a convert into DIR (the test hook pauses 1 s per sample) signalled once its
# temporary file is there, so the signal comes mid-write on a loaded machine too; its exit code.
# (No core file: SIGQUIT would write one.)
cut_convert() {
    DTRAIN_TEST_DTS_SLOW_MS=1000 bash -c 'ulimit -c 0; exec "$@"' - "$DTRAIN" data convert "$d" "$2" >"$tmp/out" 2>&1 &
    local pid=$! i
    for i in $(seq 200); do
        compgen -G "$2/.train.dts.tmp.*" >/dev/null && break
        sleep 0.05
    done
    kill -s "$1" $pid
    wait $pid
}
# An interrupted convert (SIGINT, SIGTERM, a closed terminal's SIGHUP, SIGQUIT) leaves no temporary
# file behind, nor the directory it made.
for sig in INT TERM HUP QUIT; do
    cut_convert $sig "$tmp/cut.$sig"
    rc=$?
    left=$(ls -A "$tmp/cut.$sig" 2>&1)
    [ $rc -eq $((128 + $(kill -l $sig))) ] && [ ! -e "$tmp/cut.$sig" ] && ok "SIG$sig mid-convert: exit $rc, nothing left" ||
        { bad "SIG$sig mid-convert: exit $rc, left '$left'"; cat "$tmp/out"; }
done
# SIGKILL runs no handler and leaves the temporary file; the next convert into the same place removes
# it once it is 10 minutes old and its process is gone (a fresh one may be another node's convert).
cut_convert KILL "$tmp/killed" 2>/dev/null
left=$(ls -A "$tmp/killed" 2>/dev/null)
if [ -n "$left" ]; then
    "$DTRAIN" data convert "$d" "$tmp/killed" >"$tmp/out" 2>&1
    [ -e "$tmp/killed/$left" ] && ok "a fresh temporary file $left is left alone" || bad "a fresh $left was removed"
    touch -d '20 minutes ago' "$tmp/killed/$left"
    expect 0 "removed $tmp/killed/$left" "$DTRAIN" data convert --force "$d" "$tmp/killed"
    [ ! -e "$tmp/killed/$left" ] && ok "the killed convert's $left is gone" || bad "$left is still there"
else
    bad "SIGKILL mid-convert left no temporary file to clean (the test hook did not slow the convert?)"
fi
# One file is one split: --split test picks nothing in it, and must not label a training file test.dts.
expect 2 "SRC $tmp/shards/train.dts is one file, which is one split: it would be written as $tmp/t1/test.dts" \
    "$DTRAIN" data convert --split test "$tmp/shards/train.dts" "$tmp/t1"
[ ! -e "$tmp/t1" ] && ok "nothing written for --split test of one file" || bad "$tmp/t1 written"
expect 2 "SRC $tmp/shards/train.dts is one file, which is one split: drop --split" \
    "$DTRAIN" data convert --split test "$tmp/shards/train.dts" "$tmp/t1.dts"
expect 0 "wrote $tmp/one.dts: 1 sample of 1x2x2 fp16" "$DTRAIN" data convert --split test --dtype fp16 "$d" "$tmp/one.dts"
expect 0 "per channel mean / std: 2.5 / 1.118" "$DTRAIN" data info "$tmp/one.dts"
expect 2 "$tmp/one.dts exists: give --force" "$DTRAIN" data convert --split test "$d" "$tmp/one.dts"
expect 2 "holds one split: give --split train or test" "$DTRAIN" data convert --split all "$d" "$tmp/x.dts"
expect 2 "--dtype 'int8' is not uint8, fp16 or fp32" "$DTRAIN" data convert --dtype int8 "$d" "$tmp/x.dts"
expect 2 "data info takes no --dtype" "$DTRAIN" data info --dtype fp16 "$d"
expect 2 "data info takes no --split (it is an option of dtrain data convert)" "$DTRAIN" data info --split train "$d"
expect 2 "data verify takes no --force (it is an option of dtrain data convert)" "$DTRAIN" data verify --force "$d"
expect 2 "--split 'both' is not train, test or all" "$DTRAIN" data convert --split both "$d" "$tmp/x"
# A flipped sample byte: info still opens it (the payload is not read at open), verify finds it.
cp "$tmp/shards/train.dts" "$tmp/flip.dts"
printf '\x55' | dd of="$tmp/flip.dts" bs=1 seek=129 conv=notrunc 2>/dev/null
expect 0 "train: 3 samples" "$DTRAIN" data info "$tmp/flip.dts"
expect 1 "samples or labels are damaged" "$DTRAIN" data verify "$tmp/flip.dts"
# With a broken test split beside it, both faults are said.
mkdir -p "$tmp/flipdir" && cp "$tmp/flip.dts" "$tmp/flipdir/train.dts" && head -c 100 "$tmp/shards/test.dts" >"$tmp/flipdir/test.dts"
expect 1 "the payload CRC-32 of the train shard does not match, though every sample reads as valid" \
    "$DTRAIN" data verify "$tmp/flipdir"
grep -qF "$tmp/flipdir has a test split, and it does not open: $tmp/flipdir/test.dts is 100 bytes" "$tmp/out" &&
    ok "verify: a bad CRC and a broken test split, both said" || { bad "verify flipdir"; cat "$tmp/out"; }
# A label >= classes is refused at open, naming the sample and offset (labels at 128 + 64 = 192).
cp "$tmp/shards/train.dts" "$tmp/label.dts"
printf '\x07' | dd of="$tmp/label.dts" bs=1 seek=196 conv=notrunc 2>/dev/null
expect 1 "label 7 of sample 1 (offset 196) is outside 0 to 1" "$DTRAIN" data verify "$tmp/label.dts"
# verify goes on past a bad sample and names every one, in index order, with a count per split;
# the same list whatever --threads (check_list FILE WANT: the "sample N" lines of FILE are WANT).
check_list() {
    local got
    got=$(grep -E '^    sample [0-9]+' "$1" | sed -E 's/^    (sample [0-9]+).*/\1/' | paste -sd, -)
    [ "$got" = "$2" ] && ok "verify named $2, in order" || { bad "verify named '$got', not '$2'"; cat "$1"; }
}
# verify_both WANT_RC TEXT WANT ARGS...: verify ARGS with --threads 1 and 2, the same output from
# both, exit WANT_RC, TEXT in it, and the list WANT.
verify_both() {
    local code=$1 text=$2 want=$3
    shift 3
    expect "$code" "$text" "$DTRAIN" data verify --threads 1 "$@"
    cp "$tmp/out" "$tmp/out.t1"
    check_list "$tmp/out.t1" "$want"
    expect "$code" "$text" "$DTRAIN" data verify --threads 2 "$@"
    cmp -s "$tmp/out.t1" "$tmp/out" && ok "--threads 1 and 2 print the same" ||
        { bad "--threads 1 and 2 differ"; diff "$tmp/out.t1" "$tmp/out"; }
}
# A .dts with two labels past its 2 classes (and so a payload CRC that no longer matches).
cp "$tmp/shards/train.dts" "$tmp/labels2.dts"
printf '\x07' | dd of="$tmp/labels2.dts" bs=1 seek=196 conv=notrunc 2>/dev/null
printf '\x05' | dd of="$tmp/labels2.dts" bs=1 seek=200 conv=notrunc 2>/dev/null
verify_both 1 "$tmp/labels2.dts: 2 of 3 samples bad (train 2 of 3); the payload CRC-32 of the train shard does not match" \
    "sample 1,sample 2" "$tmp/labels2.dts"
grep -qF "    sample 1 (byte offset 132 of $tmp/labels2.dts): $tmp/labels2.dts: label 7 of sample 1 (offset 196) is outside 0 to 1" \
    "$tmp/out" && grep -qF "    sample 2 (byte offset 136 of $tmp/labels2.dts): $tmp/labels2.dts: label 5 of sample 2 (offset 200)" \
    "$tmp/out" && grep -q "^  train: 2 of 3 samples bad:$" "$tmp/out" &&
    ok ".dts: each bad label with its sample's byte offset and the label's" || { bad ".dts list"; cat "$tmp/out"; }
expect 1 "label 7 of sample 1 (offset 196) is outside 0 to 1" "$DTRAIN" data info "$tmp/labels2.dts"
! grep -q "sample 2" "$tmp/out" && ok "data info still stops at the first bad label" || bad "data info went on"
# An IDX directory whose labels are signed bytes, -1 for samples 0 and 2.
mkdir -p "$tmp/neg"
cp "$d/train-images-idx3-ubyte" "$tmp/neg/"
printf '\x00\x00\x09\x01\x00\x00\x00\x03\xff\x01\xff' >"$tmp/neg/train-labels-idx1-ubyte"
verify_both 1 "$tmp/neg: 2 of 3 samples bad (train 2 of 3)" "sample 0,sample 2" "$tmp/neg"
grep -q "sample 2: .*train-labels-idx1-ubyte: label -1 of sample 2 is outside" "$tmp/out" &&
    ok "IDX: each bad label named with its file" || { bad "IDX list"; cat "$tmp/out"; }
# Bad labels that leave one class (signed bytes -1, 0, -1): no classification can be read from the
# labels, and the refusal says so (they are not "every label 0").
mkdir -p "$tmp/oneclass"
cp "$d/train-images-idx3-ubyte" "$tmp/oneclass/"
printf '\x00\x00\x09\x01\x00\x00\x00\x03\xff\x00\xff' >"$tmp/oneclass/train-labels-idx1-ubyte"
expect 1 "train-labels-idx1-ubyte: 2 of its 3 labels are outside 0 to 1048575 (the first: label -1 of sample 0) and the other 1 is 0" \
    "$DTRAIN" data verify "$tmp/oneclass"
! grep -q "every label is 0" "$tmp/out" && ok "verify: bad labels are not called all 0" || bad "verify: 'every label is 0'"
# An image folder of 3 classes x 4 PNGs with three that do not decode (samples 1, 6 and 11): the
# list names each image's path; --max-errors 2 names the first two and counts the third.
python3 "$here/make_images.py" "$tmp/imgs" 4 3
echo "not an image" >"$tmp/imgs/class0/001.png"
head -c 40 "$tmp/imgs/class1/002.png" >"$tmp/cut.png" && mv "$tmp/cut.png" "$tmp/imgs/class1/002.png"
: >"$tmp/imgs/class2/003.png"
verify_both 1 "$tmp/imgs: 3 of 12 samples bad (train 3 of 12)" "sample 1,sample 6,sample 11" --input 3x8x8 "$tmp/imgs"
grep -qF "    sample 1 ($tmp/imgs/class0/001.png): " "$tmp/out" && grep -qF "    sample 6 ($tmp/imgs/class1/002.png): " "$tmp/out" &&
    grep -qF "    sample 11 ($tmp/imgs/class2/003.png): $tmp/imgs/class2/003.png is empty" "$tmp/out" &&
    ok "image folder: each bad image's path" || { bad "image folder list"; cat "$tmp/out"; }
! grep -q "more (--max-errors" "$tmp/out" && ok "every bad sample listed: no '... and N more'" || bad "'... and N more' of none"
expect 1 "3 of 12 samples bad" "$DTRAIN" data verify --max-errors 0 --input 3x8x8 "$tmp/imgs"
check_list "$tmp/out" "sample 1,sample 6,sample 11"
# The fix it gives holds for the command that met it: only training takes --bad-samples.
expect 1 "$tmp/imgs/class0/001.png is neither JPEG" "$DTRAIN" data convert --input 3x8x8 "$tmp/imgs" "$tmp/imgs.dts"
grep -qF "fix or remove the file, or train with --bad-samples skip" "$tmp/out" &&
    ok "convert: a bad image's fix is one convert can take" || { bad "convert: bad image's fix"; cat "$tmp/out"; }
verify_both 1 "3 of 12 samples bad" "sample 1,sample 6" --max-errors 2 --input 3x8x8 "$tmp/imgs"
grep -q "^    \.\.\. and 1 more (--max-errors 0 names every one)$" "$tmp/out" && ok "--max-errors 2: ... and 1 more" ||
    { bad "--max-errors 2"; cat "$tmp/out"; }
expect 2 "data info takes no --max-errors (it is an option of dtrain data verify)" "$DTRAIN" data info --max-errors 3 "$d"
expect 2 "--max-errors" "$DTRAIN" data verify --max-errors -1 "$d"
head -c 100 "$tmp/shards/train.dts" >"$tmp/short.dts"
expect 1 "shorter than its 128-byte header" "$DTRAIN" data verify "$tmp/short.dts"
expect 0 "usage: dtrain data convert SRC DST" "$DTRAIN" data convert --help
expect 0 "usage: dtrain data verify PATH" "$DTRAIN" data verify --help

# Damaged files are refused naming the file and what is wrong; a directory of nothing known too.
truncate -s -1 "$d/train-images-idx3-ubyte"
expect 1 "train-images-idx3-ubyte is 27 bytes; its header (16 bytes) describes 12 bytes of values (truncated)" \
    "$DTRAIN" data info "$d"
head -c 3000 /dev/zero >"$c/test_batch.bin"
expect 2 "is not a dataset file dtrain recognises" "$DTRAIN" data info "$c/test_batch.bin"
expect 1 "test_batch.bin is 3000 bytes" "$DTRAIN" data info --data-format cifar10 "$c/test_batch.bin"
mkdir -p "$tmp/empty"
expect 2 "no dataset recognised in $tmp/empty" "$DTRAIN" data info "$tmp/empty"
# A path that is not there is the command's to fix (exit 2, as every command refuses a missing input).
expect 2 "does not exist" "$DTRAIN" data info "$tmp/nothing"
expect 2 "does not exist" "$DTRAIN" data verify "$tmp/nothing"
expect 2 "does not exist" "$DTRAIN" data convert "$tmp/nothing" "$tmp/nothing.dts"
# One this user may not read (as nobody: root reads everything) is not "no dataset" nor "does not
# exist": the message says the permission and its fix, and the exit is 2 as for a missing one.
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
if [ "$(id -u)" = 0 ] && chmod 755 "$tmp" && as_nobody test -x "$DTRAIN"; then
    mkdir -p "$tmp/perm/shut" && cp "$tmp/shards/train.dts" "$tmp/perm/" && cp "$tmp/shards/train.dts" "$tmp/perm/shut/"
    chmod 755 "$tmp/perm" && chmod 000 "$tmp/perm/train.dts" "$tmp/perm/shut"
    expect 2 "cannot read dataset $tmp/perm/train.dts: Permission denied: this user may not read it" \
        as_nobody "$DTRAIN" data info "$tmp/perm/train.dts"
    expect 2 "cannot read dataset $tmp/perm/shut: Permission denied" as_nobody "$DTRAIN" data info "$tmp/perm/shut"
    expect 2 "cannot reach dataset $tmp/perm/shut/train.dts: Permission denied" \
        as_nobody "$DTRAIN" data info "$tmp/perm/shut/train.dts"
    chmod 700 "$tmp/perm/shut"
else
    echo "skip: not root, or nobody cannot run $DTRAIN: the unreadable-dataset checks do not run"
fi
expect 2 "dataset format 'hdf5' is not idx, cifar10, cifar100, " "$DTRAIN" data info --data-format hdf5 "$tmp/empty"
expect 2 "takes one PATH" "$DTRAIN" data info
expect 2 "takes one PATH (a dataset directory or file), got 2 arguments" "$DTRAIN" data info "$d" "$d"
for v in 0 257; do
    expect 2 "--threads '$v' is out of range (expected an integer from 1 to 256)" "$DTRAIN" data info --threads $v "$d"
done
expect 0 "usage: dtrain data info PATH" "$DTRAIN" data info --help
# A missing value, or a value given to a flag that takes none, says so (not "unknown option").
expect 2 "--threads needs a value (see dtrain help data info)" "$DTRAIN" data info --threads
expect 2 "--force takes no value: '--force=1'" "$DTRAIN" data convert --force=1 "$d" "$tmp/y.dts"
expect 2 "unknown option '--frob'" "$DTRAIN" data info --frob "$d"
# A slip gets the closest flag, and an abbreviation of several is named, as by every command.
expect 2 "unknown option '--threds'; did you mean --threads? (see dtrain help data info)" \
    "$DTRAIN" data info --threds 2 "$d"
expect 2 "option '--d' is ambiguous: it could be --data-format, --dtype (see dtrain help data info)" \
    "$DTRAIN" data info --d idx "$d"
# --input is read strictly, whole numbers only, and applies to image folders only (an IDX or CIFAR
# or .dts file has its own shape, which a different --input would not change).
for bad_input in "3x 32x32" "+3x32x32" "3x32" "3x32x32x" "0x32x32" "3x65536x8"; do
    expect 2 "--input '$bad_input' is not CxHxW" "$DTRAIN" data info --input "$bad_input" "$c/test_batch.bin"
done
expect 2 "--input resizes image folders only, and $tmp/shards/train.dts (dts) holds samples of 1x2x2" \
    "$DTRAIN" data convert --input 3x16x16 "$tmp/shards/train.dts" "$tmp/in.dts"
[ ! -e "$tmp/in.dts" ] && ok "nothing written for a refused --input" || bad "$tmp/in.dts written"
expect 0 "wrote $tmp/in.dts: 3 samples of 1x2x2" "$DTRAIN" data convert --input 1x2x2 "$tmp/shards/train.dts" "$tmp/in.dts"
expect 2 "--input 3x2x2: --input resizes image folders only" "$DTRAIN" data info --input 3x2x2 "$tmp/in.dts"
# C, H and W each in its place: an IDX set of 2x3 images takes 1x2x3 and refuses 1x3x2.
mkdir -p "$tmp/wide"
printf '\x00\x00\x08\x03\x00\x00\x00\x02\x00\x00\x00\x02\x00\x00\x00\x03\x01\x02\x03\x04\x05\x06\x01\x02\x03\x04\x05\x06' \
    >"$tmp/wide/train-images-idx3-ubyte"
printf '\x00\x00\x08\x01\x00\x00\x00\x02\x00\x01' >"$tmp/wide/train-labels-idx1-ubyte"
expect 0 "train: 2 samples of 1x2x3" "$DTRAIN" data info --input 1x2x3 "$tmp/wide"
expect 2 "--input 1x3x2: --input resizes image folders only, and $tmp/wide (idx) holds samples of 1x2x3" \
    "$DTRAIN" data info --input 1x3x2 "$tmp/wide"
finish
