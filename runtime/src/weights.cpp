// External weights of bundles: the hash that identifies them and the loader
// that checks a weights file against the bundle before filling its storage.
#include "kiln/runtime.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

namespace {

constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ull, kPrime2 = 0xC2B2AE3D27D4EB4Full,
                   kPrime3 = 0x165667B19E3779F9ull;

uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
uint64_t round(uint64_t acc, uint64_t word) { return rotl(acc + word * kPrime2, 31) * kPrime1; }
uint64_t load64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) // byte order fixed: the same hash on every host
    v = (v << 8) | p[i];
  return v;
}

kiln_status *fail(kiln_status_code code, const std::string &message) {
  return kiln_status_create(code, message.c_str());
}

} // namespace

extern "C" {

// Four independent lanes (xxHash64's structure): the weights of a large
// model are hashed at memory speed, so checking a file costs little next to
// reading it.
uint64_t kiln_hash64(const void *data, size_t size) {
  const unsigned char *p = static_cast<const unsigned char *>(data);
  uint64_t lanes[4] = {kPrime1 + kPrime2, kPrime2, 0, 0 - kPrime1};
  size_t i = 0;
  for (; i + 32 <= size; i += 32)
    for (int l = 0; l < 4; ++l)
      lanes[l] = round(lanes[l], load64(p + i + 8 * l));
  uint64_t h = rotl(lanes[0], 1) + rotl(lanes[1], 7) + rotl(lanes[2], 12) + rotl(lanes[3], 18);
  for (int l = 0; l < 4; ++l)
    h = (h ^ round(0, lanes[l])) * kPrime1 + kPrime3;
  h += size;
  for (; i + 8 <= size; i += 8)
    h = rotl(h ^ round(0, load64(p + i)), 27) * kPrime1 + kPrime3;
  for (; i < size; ++i)
    h = rotl(h ^ (p[i] * kPrime3), 11) * kPrime1;
  h ^= h >> 33;
  h *= kPrime2;
  h ^= h >> 29;
  h *= kPrime3;
  h ^= h >> 32;
  return h;
}

kiln_status *kiln_model_load_weights(const kiln_model_desc *model, const char *path) {
  if (!model)
    return fail(KILN_INVALID_ARGUMENT, "no model");
  if (model->abi_version != KILN_ABI_VERSION)
    return fail(KILN_INVALID_ARGUMENT, "model was compiled for runtime ABI " +
                                           std::to_string(model->abi_version) +
                                           ", this runtime has " +
                                           std::to_string(KILN_ABI_VERSION));
  kiln_weights *w = model->weights;
  std::string name = model->name ? model->name : "";
  if (!w) {
    if (!path)
      return nullptr;
    return fail(KILN_INVALID_ARGUMENT,
                "model '" + name + "' has its weights in its code; it takes no weights file");
  }
  if (!path)
    return fail(KILN_INVALID_ARGUMENT, "model '" + name + "' needs its weights file");
  std::FILE *f = std::fopen(path, "rb");
  if (!f)
    return fail(KILN_IO_ERROR, std::string("cannot open weights file '") + path + "': " +
                                   std::strerror(errno));
  std::string what = std::string("weights file '") + path + "'";
  kiln_weights_file_header header;
  std::memset(&header, 0, sizeof header);
  kiln_status *status = nullptr;
  long fileSize = -1;
  if (std::fseek(f, 0, SEEK_END) == 0)
    fileSize = std::ftell(f);
  std::rewind(f);
  if (std::fread(&header, sizeof header, 1, f) != 1 ||
      std::memcmp(header.magic, KILN_WEIGHTS_MAGIC, sizeof KILN_WEIGHTS_MAGIC) != 0)
    status = fail(KILN_IO_ERROR, what + " is not a Kiln weights file");
  else if (header.abi_version != KILN_ABI_VERSION)
    status = fail(KILN_IO_ERROR, what + " was written for runtime ABI " +
                                     std::to_string(header.abi_version) + ", this runtime has " +
                                     std::to_string(KILN_ABI_VERSION));
  else if (header.size != w->size || header.hash != w->hash)
    status = fail(KILN_INVALID_ARGUMENT, what + " belongs to another model or another compile "
                                                "of '" + name + "' (" +
                                                std::to_string(header.size) + " bytes, expected " +
                                                std::to_string(w->size) + ")");
  else if (fileSize != (long)(KILN_WEIGHTS_DATA_OFFSET + w->size))
    status = fail(KILN_IO_ERROR, what + " is truncated or has extra bytes (" +
                                     std::to_string(fileSize) + " bytes, expected " +
                                     std::to_string(KILN_WEIGHTS_DATA_OFFSET + w->size) + ")");
  else if (std::fseek(f, KILN_WEIGHTS_DATA_OFFSET, SEEK_SET) != 0 ||
           std::fread(w->data, 1, w->size, f) != w->size)
    status = fail(KILN_IO_ERROR, what + " is truncated");
  else if (kiln_hash64(w->data, w->size) != w->hash)
    status = fail(KILN_IO_ERROR, what + " is corrupt: its contents do not match its hash");
  std::fclose(f);
  w->loaded = status ? 0 : 1;
  return status;
}

} // extern "C"
