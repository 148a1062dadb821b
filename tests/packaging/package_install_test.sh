#!/usr/bin/env bash
# usage: package_install_test.sh BUILD_DIR PACKAGE_NAME — see tests/packaging/CMakeLists.txt.
set -euo pipefail
build="$1"
name="$2"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cpack --config "$build/CPackConfig.cmake" -G DEB -B "$scratch/out" >"$scratch/cpack.log" 2>&1 ||
  { cat "$scratch/cpack.log"; fail "cpack failed"; }
deb="$(ls "$scratch"/out/"${name}"_*.deb 2>/dev/null | head -n1)"
[[ -n "$deb" ]] || { ls -R "$scratch/out"; fail "no ${name}_*.deb made"; }
echo "package: $(basename "$deb") ($(stat -c %s "$deb") bytes)"

[[ "$(dpkg-deb -f "$deb" Package)" == "$name" ]] || fail "package name is not $name"
depends="$(dpkg-deb -f "$deb" Depends)"
echo "Depends: $depends"
[[ "$depends" == *libc6* ]] || fail "Depends lacks libc6: dpkg-shlibdeps did not run"
[[ "$depends" == *libzstd* && "$depends" == *libssl* ]] || fail "Depends lacks the libraries stoa links"
if [[ "$name" == stoa-worker ]]; then
  [[ "$depends" != *libtorch* ]] || fail "the worker package depends on libtorch"
else
  [[ "$depends" == *libtorch* ]] || fail "the trainer package does not depend on libtorch"
fi

# apt resolves the package's dependencies from this system (simulation: installs nothing).
apt-get install -s "$deb" >"$scratch/apt.log" 2>&1 || { cat "$scratch/apt.log"; fail "apt cannot install it"; }
grep -q "^Inst $name " "$scratch/apt.log" || { cat "$scratch/apt.log"; fail "apt would not install $name"; }

# Unpacked into a prefix (no chroot, no container), the installed binary runs.
dpkg-deb -x "$deb" "$scratch/root"
binary="$scratch/root/usr/bin/stoa"
[[ -x "$binary" ]] || fail "no usr/bin/stoa in the package"
env -u STOA_SOURCE_DIR "$binary" work --help >"$scratch/help.txt" || fail "stoa work --help failed"
grep -q -- "--hub" "$scratch/help.txt" || fail "stoa work --help does not describe --hub"
if [[ "$name" == stoa ]]; then
  [[ -f "$scratch/root/usr/share/stoa/warm-start/model.safetensors" ]] ||
    fail "the demo's warm start is not under usr/share/stoa"
  env -u STOA_SOURCE_DIR "$binary" demo --help >/dev/null || fail "stoa demo --help failed"
fi
echo "ok: $name installs and runs from $(basename "$deb")"
