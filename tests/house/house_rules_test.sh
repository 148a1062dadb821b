#!/usr/bin/env bash
# The house rules that a reader should not have to re-check by hand (docs/architecture.md):
#   - no source file over 600 lines (src/, tests/, tools/);
#   - processes are spawned only in src/core/process* (fork/exec/posix_spawn/system/popen);
#   - PRNG engines only in src/core (core/rng: the same draws on every machine);
#   - only src/train/ includes libtorch (the worker builds without it).
# Each broken rule is listed with its places; the test fails if any is.
set -uo pipefail
root="${1:?usage: house_rules_test.sh SOURCE_ROOT}"
cd "$root" || exit 2
failed=0

report() {  # $1: the rule, stdin: the places breaking it
  local places
  places="$(cat)"
  if [[ -n "$places" ]]; then
    echo "house rule broken: $1" >&2
    echo "$places" | sed 's/^/  /' >&2
    failed=1
  fi
}

git_files() { git ls-files -- "$@" 2>/dev/null || find "$@" -type f; }

report "no file over 600 lines" < <(
  git_files src tests tools | grep -E '\.(h|cpp)$' | while read -r f; do
    n=$(wc -l < "$f")
    if (( n > 600 )); then echo "$f: $n lines"; fi
  done)

# fork() as a call statement (Sequence::fork and Rng::fork are copies, not processes).
report "processes are spawned only in src/core/process*" < <(
  git_files src | grep -E '\.(h|cpp)$' | grep -v '^src/core/process' |
    xargs grep -HnE '(^|[^[:alnum:]_.>])(::)?v?fork\(\)[[:space:]]*;|(execv[pe]?|execl[pe]?|posix_spawnp?|popen)\(|(std)?::system\(')

report "PRNG engines only in src/core (use core/rng.h)" < <(
  git_files src | grep -E '\.(h|cpp)$' | grep -v '^src/core/' |
    xargs grep -HnE 'std::(mt19937(_64)?|minstd_rand0?|default_random_engine|random_device|ranlux[0-9_a-z]*|knuth_b)\b')

report "only src/train/ includes libtorch" < <(
  git_files src | grep -E '\.(h|cpp)$' | grep -v '^src/train/' |
    xargs grep -HnE '#include <(torch|ATen|c10)/')

if (( failed )); then exit 1; fi
echo "house rules hold"
