#!/usr/bin/env bash
# Seed corpora of the fuzz targets, from the ONNX test data that
# scripts/setup.sh installs (libonnx-testdata); generated, not kept in git.
#
#   scripts/fuzz/make_corpus.sh OUT_DIR
#
# OUT_DIR/import, OUT_DIR/compile: every model of the ONNX node tests (the
#   compile target skips models whose inputs are too large to run);
# OUT_DIR/tensor_io: their input/output .pb files, each behind the byte that
#   picks fuzz_tensor_io's reader (0: TensorProto; 1: a sequence, 2: an
#   optional, for the sequence and optional tests), and small .npy files (3);
# OUT_DIR/c_api: a few fixed random scripts.
set -euo pipefail
out=${1:?usage: make_corpus.sh OUT_DIR}
data=${KILN_ONNX_TESTDATA:-/usr/share/libonnx-testdata/data}
[ -d "$data/node" ] || { echo "make_corpus: no ONNX test data at $data (install libonnx-testdata)" >&2; exit 1; }
mkdir -p "$out"/{import,compile,tensor_io,c_api}

n=0
for dir in "$data"/node/*/; do
  name=$(basename "$dir")
  [ -f "$dir/model.onnx" ] || continue
  cp "$dir/model.onnx" "$out/import/$name.onnx"
  cp "$dir/model.onnx" "$out/compile/$name.onnx"
  case $name in
    *sequence* | *split_to_sequence* | *concat_from_sequence*) selector='\x01' ;;
    *optional*) selector='\x02' ;;
    *) selector='\x00' ;;
  esac
  for pb in "$dir"/test_data_set_0/*.pb; do
    [ -f "$pb" ] || continue
    { printf "$selector"; cat "$pb"; } > "$out/tensor_io/$name-$(basename "$pb")"
  done
  n=$((n + 1))
done

# .npy files: version 1.0 headers of a few dtypes and shapes, written here
# byte by byte (no numpy needed).
npy() { # NAME DESCR SHAPE PAYLOAD_BYTES
  local header="{'descr': '$2', 'fortran_order': False, 'shape': $3, }"
  local pad=$(( (64 - (10 + ${#header} + 1) % 64) % 64 ))
  {
    printf '\x03\x93NUMPY\x01\x00'
    local len=$(( ${#header} + pad + 1 ))
    printf "\\x$(printf %02x $((len & 255)))\\x$(printf %02x $((len >> 8)))"
    printf '%s' "$header"
    printf '%*s' "$pad" ''
    printf '\n'
    head -c "$4" /dev/zero
  } > "$out/tensor_io/npy-$1"
}
npy f32_2x3 '<f4' '(2, 3)' 24
npy i64_4 '<i8' '(4,)' 32
npy u8_scalar '|u1' '()' 1
npy b1_2x2 '|b1' '(2, 2)' 4
npy f16_3 '<f2' '(3,)' 6

python3 - "$out/c_api" <<'PY'
import random, sys
rng = random.Random(20261123)
for i in range(16):
    with open(f"{sys.argv[1]}/script-{i:02d}", "wb") as f:
        f.write(bytes(rng.randrange(256) for _ in range(rng.randrange(16, 256))))
PY
echo "make_corpus: $n models; $(ls "$out/tensor_io" | wc -l) tensor files; corpora in $out"
