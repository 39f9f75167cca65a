#!/usr/bin/env bash
# Restore onto tmpfs with the guest's free pages cold (idle 20 s after the
# last free: reported to the host) or warm (1.5 GiB written to /dev/shm and
# removed right before).
set -eu
. /var/tmp/fp/env.sh
L=/work/main/target/release/larder
T=/dev/shm/fp-r
rounds=${1:-4}
one() { # tool cond
    rm -rf $T; mkdir -p $T
    if [ "$2" = cold ]; then sleep 20; else
        dd if=/dev/zero of=/dev/shm/fp-warm bs=1M count=1536 status=none; rm /dev/shm/fp-warm; fi
    case $1 in
        larder) cmd=($L restore latest --target $T);;
        restic) cmd=(restic restore latest -q --target $T);;
        cp) cmd=(cp -a /var/tmp/fp/corpus $T/);;
    esac
    /usr/bin/time -f "%e %M" -o /var/tmp/fp/t.txt "${cmd[@]}" > /dev/null
    echo "$r $1 $2 $(cat /var/tmp/fp/t.txt)"
    rm -rf $T
}
for ((r = 1; r <= rounds; r++)); do
    if [ $((r % 2)) = 1 ]; then conds="cold warm"; else conds="warm cold"; fi
    for tool in larder restic cp; do for c in $conds; do one $tool $c; done; done
done
