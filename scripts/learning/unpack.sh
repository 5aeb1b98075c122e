#!/usr/bin/env bash
# Unpacks a tar archive (the committed .tar.xz of data/learning) into a directory: tar, or Python's
# tarfile where tar has no xz at hand.
#   scripts/learning/unpack.sh ARCHIVE DIR
set -euo pipefail
archive=${1:?usage: $0 ARCHIVE DIR} dir=${2:?usage: $0 ARCHIVE DIR}
[[ -f $archive ]] || { echo "$archive: no such archive" >&2; exit 2; }
tar xf "$archive" -C "$dir" 2>/dev/null || python3 -m tarfile -e "$archive" "$dir"
