// Telling input shapes that do not fit a model from other compile errors.
// Kept free of MLIR headers: the JIT's model layer includes it.
#ifndef KILN_IR_SHAPEERRORS_H
#define KILN_IR_SHAPEERRORS_H

#include <cstdint>

namespace kiln {

/// How many times result-type inference has reported operands whose shapes
/// its op cannot take (broadcasting 3 against 4, a Reshape of 7 elements
/// into 6, MatMul contraction sizes that differ, ...) as errors on this
/// thread. A compile at the shapes of a run's inputs that fails while this
/// count grows failed because those shapes do not fit the model: the JIT
/// reports KILN_SHAPE_MISMATCH then (kiln.ShapeError in Python), not a
/// compile error.
uint64_t shapeInferenceRefusals();

/// Sets the count back: an importer that tries one form of a node and
/// falls back on another when it fails (a short Loop, run-time form first)
/// forgets the refusals of the attempt it discarded.
void forgetShapeInferenceRefusals(uint64_t count);

} // namespace kiln

#endif
