// Recycling of large tensor buffers between runs (see buffer_cache.cpp).
#ifndef KILN_RUNTIME_BUFFER_CACHE_H
#define KILN_RUNTIME_BUFFER_CACHE_H

#include <cstddef>

namespace kiln_rt {

/// Rounds a tensor's byte count up to the size its buffer is allocated with:
/// 64-byte aligned, at least 64 bytes (empty tensors still get a pointer),
/// whole pages for buffers large enough to be recycled.
size_t bufferSize(size_t bytes);
/// A 64-byte aligned buffer of bufferSize(bytes) bytes, uninitialised: a
/// recycled one of that size when there is one. NULL when out of memory.
void *acquireBuffer(size_t bytes);
/// Gives back a buffer from acquireBuffer(bytes): kept for reuse when large,
/// freed otherwise.
void releaseBuffer(void *data, size_t bytes);

} // namespace kiln_rt

#endif
