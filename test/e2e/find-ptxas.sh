# Sourced by the PTX checks: sets ptxas to $PTXAS, or to the first ptxas
# of $CUDA_HOME, /usr/local/cuda and PATH; empty if there is none.
ptxas=${PTXAS:-}
if [ -z "$ptxas" ]; then
  for p in "${CUDA_HOME:-/nonexistent}/bin/ptxas" /usr/local/cuda/bin/ptxas "$(command -v ptxas || true)"; do
    if [ -x "$p" ]; then ptxas=$p; break; fi
  done
fi
