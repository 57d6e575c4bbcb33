#!/bin/sh
# kilnc MODEL --emit=obj writes an x86-64 ELF relocatable object that
# defines kiln_entry.
set -eu
kilnc=$1 model=$2 readelf=$3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$kilnc" "$model" --emit=obj -o "$out/model.o"
"$readelf" -h -s "$out/model.o" > "$out/readelf.txt"
grep -q 'Class: *ELF64' "$out/readelf.txt"
grep -q 'Type: *REL (Relocatable file)' "$out/readelf.txt"
grep -q 'Machine: *Advanced Micro Devices X86-64' "$out/readelf.txt"
grep -q 'FUNC *GLOBAL *DEFAULT .* kiln_entry$' "$out/readelf.txt"
echo "ok: $(wc -c < "$out/model.o") bytes, ELF64 x86-64 relocatable, defines kiln_entry"
