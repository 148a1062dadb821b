#!/usr/bin/env bash
# The house rules that a reader should not have to re-check by hand (docs/architecture.md):
#   - no source file over 600 lines (src/, tests/, tools/);
#   - processes are spawned only in src/core/process* (fork/exec/posix_spawn/system/popen);
#   - PRNG engines only in src/core (core/rng: the same draws on every machine);
#   - only src/train/ includes libtorch (the worker builds without it);
#   - a roles folder includes only the roles folders its library links (src/roles/CMakeLists.txt:
#     each `stoa_role(NAME ROLES ...)` names the roles below it), so no include runs both ways;
#   - a .cpp defines members only of classes declared in its own folder (a folder that looks like
#     a module is one: it can be read and tested without the class of another folder).
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
  git_files src tests tools | grep -E '\.(h|cpp)$' | xargs wc -l |
    awk '$2 != "total" && $1 > 600 { print $2 ": " $1 " lines" }')

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

# The roles each roles folder may include: itself, the ROLES its stoa_role line names and theirs
# in turn (the lines come bottom up, so a named role is already known).
declare -A role_may=()
while read -r name uses; do
  may=" $name "
  for u in $uses; do may+="${role_may[$u]:- $u } "; done
  role_may[$name]="$may"
done < <(sed -nE 's/^[[:space:]]*stoa_role\(([a-z_]+)( ROLES ([a-z_ ]+))?.*$/\1 \3/p' \
           src/roles/CMakeLists.txt)
report "a roles folder includes only the roles its library links (src/roles/CMakeLists.txt)" < <(
  if (( ${#role_may[@]} == 0 )); then echo "src/roles/CMakeLists.txt: no stoa_role line read"; fi
  git_files src/roles | grep -E '^src/roles/[a-z_]+/.*\.(h|cpp)$' | while read -r f; do
    from="${f#src/roles/}"
    from="${from%%/*}"
    if [[ -z "${role_may[$from]:-}" ]]; then
      echo "$f: roles/$from is no stoa_role"
      continue
    fi
    grep -HnoE '#include "roles/[a-z_]+/' "$f" | while IFS= read -r hit; do
      to="${hit##*\"roles/}"
      to="${to%/}"
      [[ "${role_may[$from]}" == *" $to "* ]] ||
        echo "${hit%%:#include*}: includes roles/$to, which roles/$from does not link"
    done
  done)

# Where each class or struct of src/ is declared (a name may be declared in several folders), then
# every member definition of src/'s .cpp files (at column 0: a call inside a body is indented),
# in one grep each and one awk.
report "a .cpp defines members only of classes declared in its own folder" < <(
  {
    git_files src | grep -E '\.h$' | xargs grep -HoE \
      '^(class|struct) [A-Za-z_][A-Za-z0-9_]*( final)?( *:[^:;{][^;{]*)? *\{' |
      sed -E 's/^([^:]+):(class|struct) ([A-Za-z_][A-Za-z0-9_]*).*/D \1 \3/'
    git_files src | grep -E '\.cpp$' | xargs grep -HE \
      '^[A-Za-z][^;]*[^[:alnum:]_:][A-Z][A-Za-z0-9_]*::~?[A-Za-z_][A-Za-z0-9_]*\(' |
      grep -v ';' |
      sed -E 's/^([^:]+):.*[^[:alnum:]_:]([A-Z][A-Za-z0-9_]*)::~?[A-Za-z_][A-Za-z0-9_]*\(.*/U \1 \2/'
  } | awk '
    function dir(f) { sub(/\/[^\/]*$/, "", f); return f }
    $1 == "D" { where[$3] = where[$3] " " dir($2) " "; next }
    $1 == "U" && ($3 in where) && index(where[$3], " " dir($2) " ") == 0 {
      bad[$2 ": defines " $3 ":: members, declared in" where[$3]] = 1
    }
    END { for (b in bad) print b }' | sort)

if (( failed )); then exit 1; fi
echo "house rules hold"
