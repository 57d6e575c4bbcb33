#!/bin/sh
# The same model compiled twice, in two processes, with the same options,
# gives byte-identical objects, bundles (object, header, external weights)
# and PTX. --no-cache: both compiles really run.
set -eu
kilnc=$1 model=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for run in 1 2; do
  mkdir -p "$out/$run"
  "$kilnc" "$model" --no-cache --emit=obj -o "$out/$run/model.o"
  "$kilnc" "$model" --no-cache --emit=bundle --weights=external -o "$out/$run/bundle"
  "$kilnc" "$model" --no-cache --emit=ptx -o "$out/$run/model.ptx"
  "$kilnc" "$model" --no-cache --emit=obj --target=aarch64-linux-gnu --mcpu=generic -o "$out/$run/arm.o"
done
for f in model.o bundle.o bundle.h bundle.weights model.ptx arm.o; do
  cmp "$out/1/$f" "$out/2/$f"
  echo "identical: $f ($(wc -c < "$out/1/$f") bytes)"
done
