#!/usr/bin/env bash
# Backup/restore of 256 MiB of random data: local repository vs SFTP over loopback sshd.
# Usage: BIN=target/release/larder scripts/sftp-bench.sh   (needs openssh-server; run as the user sshd logs in as)
set -euo pipefail
BIN=${BIN:-/work/target-helpers/release/larder}
T=$(mktemp -d) && mkdir -p "$T/root" /run/sshd
ssh-keygen -q -t ed25519 -N '' -f "$T/host_key"; ssh-keygen -q -t ed25519 -N '' -f "$T/client_key"
cp "$T/client_key.pub" "$T/authorized_keys"; chmod 600 "$T/authorized_keys"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$T/sshd_config" <<C
ListenAddress 127.0.0.1
Port $PORT
HostKey $T/host_key
PidFile $T/sshd.pid
AuthorizedKeysFile $T/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
Subsystem sftp internal-sftp
C
/usr/sbin/sshd -D -e -f "$T/sshd_config" >"$T/sshd.log" 2>&1 & SSHD=$!
trap 'kill $SSHD; rm -rf "$T"' EXIT
sleep 1
echo "[127.0.0.1]:$PORT $(cat $T/host_key.pub)" > "$T/known_hosts"
export LARDER_SFTP_COMMAND="exec ssh -F /dev/null -i $T/client_key -p $PORT -o IdentitiesOnly=yes -o UserKnownHostsFile=$T/known_hosts -o StrictHostKeyChecking=yes -o BatchMode=yes -s -- \"\$LARDER_SFTP_DESTINATION\" sftp"
export LARDER_PASSWORD=bench LARDER_KDF_WORK_FACTOR=10 LARDER_INSECURE_TEST_KDF=1 LARDER_STATE_DIR=$T/state
mkdir -p "$T/src"; for i in 1 2 3 4; do head -c $((64<<20)) /dev/urandom > "$T/src/f$i"; done
for repo in "$T/local" "sftp:$(whoami)@127.0.0.1:$T/root/repo"; do
  c="$T/cache-$RANDOM"
  $BIN -q -r "$repo" --cache-dir "$c" init
  s=$(date +%s.%N); $BIN -q -r "$repo" --cache-dir "$c" backup "$T/src"; e=$(date +%s.%N)
  echo "$repo backup: $(echo "$e - $s" | bc) s"
  s=$(date +%s.%N); $BIN -q -r "$repo" --cache-dir "$c" backup "$T/src"; e=$(date +%s.%N)
  echo "$repo re-backup: $(echo "$e - $s" | bc) s"
  rm -rf "$T/out"; s=$(date +%s.%N); $BIN -q -r "$repo" --cache-dir "$T/cache-empty-$RANDOM" restore "latest:$T/src" --target "$T/out"; e=$(date +%s.%N)
  echo "$repo restore (empty cache): $(echo "$e - $s" | bc) s"
  cmp "$T/src/f3" "$T/out/f3"
done
