// Recycling of large tensor buffers between runs (see buffer_cache.cpp).
#ifndef KILN_RUNTIME_BUFFER_CACHE_H
#define KILN_RUNTIME_BUFFER_CACHE_H

#include <cstddef>

namespace kiln_rt {

/// A tensor's byte count with its padding: a multiple of 64 bytes, at least
/// 64 (empty tensors still get a pointer). What a new buffer must hold.
size_t paddedSize(size_t bytes);
/// Rounds a tensor's byte count up to the size its buffer is allocated with:
/// 64-byte aligned, at least 64 bytes (empty tensors still get a pointer),
/// and for buffers large enough to be recycled, the next of two size classes
/// an octave (2^k, 3 * 2^(k-1)): at most 1.5x the bytes.
size_t bufferSize(size_t bytes);
/// A 64-byte aligned buffer of at least bufferSize(bytes) bytes,
/// uninitialised: a recycled one when one fits. `capacity` receives its
/// true size, which releaseBuffer needs. NULL when out of memory.
void *acquireBuffer(size_t bytes, size_t &capacity);
/// Gives back a buffer from acquireBuffer with the capacity it gave: kept
/// for reuse when large, freed otherwise.
void releaseBuffer(void *data, size_t capacity);

} // namespace kiln_rt

#endif
