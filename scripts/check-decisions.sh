#!/usr/bin/env bash
# Checks the decision records against their index (docs/decisions/README.md):
#   - every record (NNNN-title.md) has a `Status:` line within its first 5 lines;
#   - every record has a row in the index, and every row names a record that exists;
#   - the index's status for a record is the record's status line without its
#     parenthesised parts (date, issue, notes): `accepted`, `amended by NNNN`, ...
# Prints nothing and exits 0 when all holds; otherwise prints what to fix and exits 1.
#
# Usage: scripts/check-decisions.sh [DECISIONS_DIR]   (default: docs/decisions of this repository)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=${1:-$root/docs/decisions}
dir=${dir%/}
index=$dir/README.md

if [[ ! -d $dir ]]; then
    echo "check-decisions: $dir is not a folder; pass the decisions folder (default docs/decisions)" >&2
    exit 1
fi
if [[ ! -f $index ]]; then
    echo "check-decisions: $index is missing; write the index of the decision records there" >&2
    exit 1
fi

# The status words of a status value: parenthesised parts removed, spaces collapsed.
normalize() {
    awk '{
        s = $0
        while (match(s, /\([^()]*\)/)) s = substr(s, 1, RSTART - 1) substr(s, RSTART + RLENGTH)
        gsub(/[ \t]+/, " ", s); gsub(/ ;/, ";", s); sub(/^ /, "", s); sub(/ $/, "", s)
        print s
    }'
}

errors=()

# The index's rows: "file<TAB>status" for each table row whose first cell links to a record
# (a `\|` inside a cell is text, not a column border).
rows=$(awk '
    /^[ \t]*\|/ {
        line = $0
        gsub(/\\\|/, "\034", line)
        n = split(line, cell, "|")
        if (n < 4 || !match(cell[2], /\]\([^)]*\)/)) next
        file = substr(cell[2], RSTART + 2, RLENGTH - 3)
        sub(/^\.\//, "", file)
        status = cell[4]
        gsub(/\034/, "|", status)
        print file "\t" status
    }' "$index")

shopt -s nullglob
records=()
for path in "$dir"/[0-9][0-9][0-9][0-9]-*.md; do
    records+=("${path##*/}")
done

for file in "${records[@]}"; do
    path=$dir/$file
    status_line=$(head -n 5 "$path" | grep -m 1 '^Status:' || true)
    if [[ -z $status_line ]]; then
        errors+=("$path: no 'Status:' line in its first 5 lines; add one under the heading, after a blank line, e.g. 'Status: accepted (YYYY-MM-DD, issue N)', and a blank line after it")
    fi

    # "=" and the row's status when the index has a row for the record, nothing otherwise.
    row=$(printf '%s\n' "$rows" | awk -F'\t' -v f="$file" '$1 == f { print "=" $2; exit }')
    if [[ -z $row ]]; then
        errors+=("$path: no row in $index; add '| [${file:0:4}]($file) | title | status | superseded/amended by | date | issue |' in number order")
        continue
    fi
    [[ -z $status_line ]] && continue

    record_status=$(printf '%s\n' "${status_line#Status:}" | normalize)
    index_status=$(printf '%s\n' "${row#=}" | normalize)
    if [[ $record_status != "$index_status" ]]; then
        errors+=("$path: its status line says '$record_status' but its row in $index says '${index_status:-(nothing)}'; make the row's status '$record_status' (or correct the record's status line)")
    fi
done

while IFS=$'\t' read -r file _; do
    [[ -z $file ]] && continue
    if [[ ! -f $dir/$file ]]; then
        errors+=("$index: a row links to $file, which does not exist in $dir; remove the row or fix its link")
    fi
done <<< "$rows"

if ((${#errors[@]} > 0)); then
    printf 'check-decisions: %s\n' "${errors[@]}" >&2
    exit 1
fi
