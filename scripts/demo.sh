#!/usr/bin/env bash
# The main job on an embedded default: installs what is missing, builds, mounts the sample
# bucket that ships with the repository (written by the real HSDS), shows it, unmounts.
# Another bucket: scripts/demo.sh BUCKET_DIR [HSDS_USER]
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
bucket=${1:-tests/data/hsds-v2/hsdstest}
user=${2:-test_user1}
mnt=$(mktemp -d /tmp/h5osfs-demo.XXXXXX)
log=$(mktemp /tmp/h5osfs-demo-log.XXXXXX)
cleanup() { fusermount3 -u "$mnt" 2>/dev/null || true; rmdir "$mnt" 2>/dev/null || true; }
trap cleanup EXIT

./build/h5osfs -o "user=$user,ro,log_file=$log" "$bucket" "$mnt"
echo "\$ h5osfs -o user=$user,ro $bucket $mnt"
echo "\$ ls -l $mnt $mnt/home"; ls -l "$mnt" "$mnt/home"
echo "\$ ls -l $mnt/home/test_user1"; ls -l "$mnt/home/test_user1" || true
first=$(find "$mnt" -maxdepth 3 -type f | sort | head -n 1)
if [ -n "$first" ]; then
  echo "\$ stat $first"; stat "$first"
  echo "\$ getfattr -n user.h5osfs.root $first"
  /usr/bin/python3 -c 'import os,sys; print(os.getxattr(sys.argv[1], "user.h5osfs.root").decode())' "$first"
fi
s3="$mnt/home/test_user1/sample3.h5"
if [ -e "$s3" ]; then
  echo "\$ h5ls -r $s3"; h5ls -r "$s3"
  echo "\$ h5dump -d /sub/small_u16 -c 8 $s3"; h5dump -d /sub/small_u16 -c 8 "$s3"
  echo "\$ h5diff tests/data/hsds-v2/source/sample3.h5 $s3 && echo equal"
  h5diff tests/data/hsds-v2/source/sample3.h5 "$s3" && echo equal
fi
echo "\$ fusermount3 -u $mnt"
fusermount3 -u "$mnt"

# Writing: a read-write mount of a copy of the sample bucket, a cp into it, what it holds now.
[ "$bucket" = tests/data/hsds-v2/hsdstest ] || exit 0
work=$(mktemp -d /tmp/h5osfs-demo-rw.XXXXXX)
cleanup() { fusermount3 -u "$mnt" 2>/dev/null || true; rmdir "$mnt" 2>/dev/null || true;
            rm -rf "$work"; }
cp -r "$bucket" "$work/bucket"
./build/h5osfs -o "user=$user,log_file=$log,cache_dir=$work/cache" "$work/bucket" "$mnt"
echo "\$ h5osfs -o user=$user,cache_dir=$work/cache $work/bucket $mnt"
src=tests/data/hsds-v2/source/sample2.h5
dst="$mnt/home/$user/copied.h5"
echo "\$ cp $src $dst"; cp "$src" "$dst"
echo "\$ h5diff $src $dst && echo equal"; h5diff "$src" "$dst" && echo equal
root=$(/usr/bin/python3 -c 'import os,sys; print(os.getxattr(sys.argv[1], "user.h5osfs.root").decode())' "$dst")
echo "\$ cat $work/bucket/home/$user/copied.h5/.domain.json"
cat "$work/bucket/home/$user/copied.h5/.domain.json"; echo
echo "\$ find $work/bucket/db/${root:2:17} -type f | head"
find "$work/bucket/db/${root:2:17}" -type f | sort | head
echo "\$ fusermount3 -u $mnt"
