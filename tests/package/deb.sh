#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The Debian package (ctest: package_deb): CPack builds remora_<version>_<arch>.deb
# from the build; unpacked into a fresh folder (no dpkg -i needed), its driver
# runs from there: --version, and `remora info default.json` with the packaged
# configs and data. Skipped (77) where dpkg-deb is missing.
# Usage: deb.sh BUILD_DIR WORK_DIR
set -euo pipefail
build=$1; work=$2
command -v dpkg-deb >/dev/null 2>&1 || { echo "package_deb: no dpkg-deb: skipped"; exit 77; }
rm -rf "$work"; mkdir -p "$work"
cpack -G DEB -B "$work" --config "$build/CPackConfig.cmake" >"$work/cpack.log" 2>&1 ||
  { cat "$work/cpack.log"; exit 1; }
deb=$(ls "$work"/remora_*.deb)
dpkg-deb -I "$deb" >"$work/control.txt"
grep -q "^ Package: remora" "$work/control.txt"
grep -q "^ Depends: .*libopenblas" "$work/control.txt" || { echo "package_deb: no OpenBLAS dependency:"; cat "$work/control.txt"; exit 1; }
dpkg-deb -x "$deb" "$work/root"
for f in usr/bin/remora usr/include/remora/remora.h usr/share/remora/configs/default.json \
         usr/share/remora/data/tinyshakespeare.txt usr/share/doc/remora/LICENSE; do
  test -e "$work/root/$f" || { echo "package_deb: $f missing from $deb"; exit 1; }
done
ls "$work"/root/usr/lib*/pkgconfig/remora.pc "$work"/root/usr/lib*/cmake/Remora/RemoraConfig.cmake >/dev/null
(cd "$work" && env -u LD_LIBRARY_PATH "$work/root/usr/bin/remora" --version >"$work/version.txt")
grep -q "^remora [0-9]" "$work/version.txt"
(cd "$work" && env -u LD_LIBRARY_PATH "$work/root/usr/bin/remora" info default.json >"$work/info.txt" 2>&1) ||
  { echo "package_deb: 'remora info default.json' from the unpacked package failed:"; cat "$work/info.txt"; exit 1; }
echo "package_deb: $(basename "$deb") ($(du -h "$deb" | cut -f1)) unpacks and its remora runs: $(head -1 "$work/version.txt")"
rm -rf "$work"
