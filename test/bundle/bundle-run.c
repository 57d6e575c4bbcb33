/* Runs a Kiln bundle on an ONNX test-data folder and checks its outputs:
 * the program the bundle tests (host, AArch64 under qemu, CUDA) build
 * against the runtime alone. Compile with
 *   -DKILN_BUNDLE_HEADER='"NAME.h"' -DKILN_BUNDLE_MODEL=NAME_model
 * and run as
 *   bundle-run DIR [--weights FILE] [--atol X] [--rtol Y] [--bench N]
 *              [--device cpu|cuda]
 *   bundle-run --describe [--dump-ptx FILE]
 * DIR holds input_J.pb (and output_J.pb to compare with), ONNX TensorProtos.
 * A CUDA bundle runs on GPU 0 (--device cpu asks kiln_model_execute, which
 * refuses it); without a GPU it prints "SKIP no GPU: why" and exits 0.
 * --describe prints a CUDA bundle's kernels, one "name grid block shared
 * params" line each; --dump-ptx writes its PTX.
 * Exit status 0 only when every output matched. */
#include KILN_BUNDLE_HEADER
#include "kiln/cuda.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
  int32_t dtype, rank;
  int64_t dims[KILN_MAX_RANK];
  unsigned char *data; /* dense, little-endian, dtype-sized elements */
  size_t bytes;
} proto_tensor;

static int read_file(const char *path, unsigned char **out, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return 0;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  *out = malloc(n > 0 ? (size_t)n : 1);
  *size = fread(*out, 1, n > 0 ? (size_t)n : 0, f);
  fclose(f);
  return *size == (size_t)(n > 0 ? n : 0);
}

static int varint(const unsigned char **p, const unsigned char *end, uint64_t *v) {
  *v = 0;
  for (int shift = 0; *p < end && shift < 64; shift += 7) {
    unsigned char b = *(*p)++;
    *v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80))
      return 1;
  }
  return 0;
}

/* Appends `n` bytes to t->data. */
static void append(proto_tensor *t, const void *src, size_t n) {
  t->data = realloc(t->data, t->bytes + n);
  memcpy(t->data + t->bytes, src, n);
  t->bytes += n;
}

/* int32_data carries every integer type narrower than 64 bits: keep the
 * dtype's width. */
static void append_int32(proto_tensor *t, uint64_t v) {
  int32_t x = (int32_t)v;
  size_t width = kiln_dtype_size(t->dtype);
  append(t, &x, width && width < 4 ? width : 4);
}

/* The fields of TensorProto this reader needs: dims (1), data_type (2),
 * float_data (4), int32_data (5), int64_data (7), raw_data (9),
 * double_data (10), uint64_data (11). */
static int parse_tensor(const unsigned char *p, size_t size, proto_tensor *t) {
  const unsigned char *end = p + size;
  memset(t, 0, sizeof *t);
  while (p < end) {
    uint64_t key, v;
    if (!varint(&p, end, &key))
      return 0;
    int field = (int)(key >> 3), wire = (int)(key & 7);
    if (wire == 0) {
      if (!varint(&p, end, &v))
        return 0;
      if (field == 1 && t->rank < KILN_MAX_RANK)
        t->dims[t->rank++] = (int64_t)v;
      else if (field == 2)
        t->dtype = (int32_t)v;
      else if (field == 5)
        append_int32(t, v);
      else if (field == 7 || field == 11) /* int64_data, uint64_data */
        append(t, &v, 8);
    } else if (wire == 2) {
      if (!varint(&p, end, &v) || v > (uint64_t)(end - p))
        return 0;
      const unsigned char *q = p, *qend = p + v;
      p = qend;
      if (field == 9 || field == 4 || field == 10) {
        append(t, q, (size_t)v);
      } else if (field == 1 || field == 5 || field == 7 || field == 11) {
        while (q < qend) {
          uint64_t x;
          if (!varint(&q, qend, &x))
            return 0;
          if (field == 1 && t->rank < KILN_MAX_RANK) {
            t->dims[t->rank++] = (int64_t)x;
          } else if (field == 5) {
            append_int32(t, x);
          } else if (field == 7 || field == 11) {
            append(t, &x, 8);
          }
        }
      }
    } else if (wire == 5) {
      if (end - p < 4)
        return 0;
      if (field == 4)
        append(t, p, 4);
      p += 4;
    } else if (wire == 1) {
      if (end - p < 8)
        return 0;
      if (field == 10)
        append(t, p, 8);
      p += 8;
    } else {
      return 0;
    }
  }
  return 1;
}

static int load_tensor(const char *path, proto_tensor *t) {
  unsigned char *bytes;
  size_t size;
  if (!read_file(path, &bytes, &size))
    return 0;
  int ok = parse_tensor(bytes, size, t);
  free(bytes);
  return ok;
}

static double element(const void *data, int32_t dtype, int64_t i) {
  switch (dtype) {
  case KILN_FLOAT32: return ((const float *)data)[i];
  case KILN_FLOAT64: return ((const double *)data)[i];
  case KILN_INT64: return (double)((const int64_t *)data)[i];
  case KILN_INT32: return ((const int32_t *)data)[i];
  case KILN_UINT8: case KILN_BOOL: return ((const uint8_t *)data)[i];
  case KILN_INT8: return ((const int8_t *)data)[i];
  default: return NAN;
  }
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Where the bundle runs: kiln_model_execute, or a model loaded on a GPU. */
static kiln_cuda_model *gpu_model;

static kiln_status *execute(const kiln_model_desc *model, kiln_tensor **inputs, int n_in,
                            kiln_tensor **outputs, int n_out) {
  if (gpu_model)
    return kiln_cuda_model_execute(gpu_model, (const kiln_tensor *const *)inputs, n_in, outputs,
                                   n_out);
  return kiln_model_execute(model, (const kiln_tensor *const *)inputs, n_in, outputs, n_out);
}

static int describe(const kiln_model_desc *model, const char *ptx_path) {
  const kiln_cuda_code *code = model->cuda;
  if (!code) {
    printf("%s: CPU code\n", model->name);
    return 0;
  }
  printf("%s: sm_%d, %d kernels, %llu bytes of PTX, %llu bytes of weights%s\n", model->name,
         code->compute_capability, code->num_kernels, (unsigned long long)strlen(code->ptx),
         (unsigned long long)(model->weights ? model->weights->size : code->weights_size),
         model->weights ? " (external)" : "");
  for (int k = 0; k < code->num_kernels; ++k) {
    const kiln_cuda_kernel_desc *d = &code->kernels[k];
    printf("kernel %s %u,%u,%u %u,%u,%u %u %u\n", d->name, d->grid[0], d->grid[1], d->grid[2],
           d->block[0], d->block[1], d->block[2], d->shared_bytes, d->num_params);
  }
  if (ptx_path) {
    FILE *f = fopen(ptx_path, "wb");
    if (!f || fputs(code->ptx, f) < 0 || fclose(f) != 0) {
      fprintf(stderr, "bundle-run: cannot write %s\n", ptx_path);
      return 1;
    }
  }
  return 0;
}

int main(int argc, char **argv) {
  const kiln_model_desc *model = &KILN_BUNDLE_MODEL;
  const char *dir = NULL, *weights = NULL, *device = NULL, *ptx_path = NULL;
  double atol = 1e-4, rtol = 1e-3;
  int bench = 0, describe_only = 0;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--weights") && i + 1 < argc) weights = argv[++i];
    else if (!strcmp(argv[i], "--atol") && i + 1 < argc) atol = atof(argv[++i]);
    else if (!strcmp(argv[i], "--rtol") && i + 1 < argc) rtol = atof(argv[++i]);
    else if (!strcmp(argv[i], "--bench") && i + 1 < argc) bench = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--device") && i + 1 < argc) device = argv[++i];
    else if (!strcmp(argv[i], "--dump-ptx") && i + 1 < argc) ptx_path = argv[++i];
    else if (!strcmp(argv[i], "--describe")) describe_only = 1;
    else if (!dir) dir = argv[i];
    else { fprintf(stderr, "bundle-run: unexpected argument '%s'\n", argv[i]); return 2; }
  }
  if (describe_only)
    return describe(model, ptx_path);
  if (device && strcmp(device, "cpu") && strcmp(device, "cuda")) {
    fprintf(stderr, "bundle-run: --device needs cpu or cuda, not '%s'\n", device);
    return 2;
  }
  if (!dir) {
    fprintf(stderr, "usage: bundle-run DIR [--weights FILE] [--atol X] [--rtol Y] [--bench N] "
                    "[--device cpu|cuda]\n       bundle-run --describe [--dump-ptx FILE]\n");
    return 2;
  }
  kiln_status *st = kiln_model_load_weights(model, weights);
  if (st) {
    fprintf(stderr, "bundle-run: %s\n", kiln_status_message(st));
    return 1;
  }
  kiln_cuda_device *gpu = NULL;
  if (device ? !strcmp(device, "cuda") : model->cuda != NULL) {
    st = kiln_cuda_device_open(0, &gpu);
    if (st && kiln_status_get_code(st) == KILN_DEVICE_ERROR && !gpu) {
      printf("SKIP no GPU: %s\n", kiln_status_message(st));
      kiln_status_free(st);
      return 0;
    }
    if (!st)
      st = kiln_cuda_model_load(gpu, model, &gpu_model);
    if (st) {
      fprintf(stderr, "bundle-run: %s\n", kiln_status_message(st));
      return 1;
    }
    printf("%s: loaded on %s\n", model->name, kiln_cuda_device_name(gpu));
  }
  int n_in = model->num_inputs, n_out = model->num_outputs;
  kiln_tensor **inputs = calloc(n_in + 1, sizeof *inputs);
  kiln_tensor **outputs = calloc(n_out + 1, sizeof *outputs);
  char path[4096];
  for (int i = 0; i < n_in; ++i) {
    proto_tensor t;
    snprintf(path, sizeof path, "%s/input_%d.pb", dir, i);
    if (!load_tensor(path, &t)) {
      fprintf(stderr, "bundle-run: cannot read %s\n", path);
      return 1;
    }
    inputs[i] = kiln_tensor_create(t.dtype, t.rank, t.dims);
    if (!inputs[i] || kiln_tensor_num_bytes(inputs[i]) != t.bytes) {
      fprintf(stderr, "bundle-run: %s: %zu data bytes for its shape and type\n", path, t.bytes);
      return 1;
    }
    memcpy(kiln_tensor_data(inputs[i]), t.data, t.bytes);
    free(t.data);
  }
  double start = now_ms();
  st = execute(model, inputs, n_in, outputs, n_out);
  double first = now_ms() - start;
  if (st) {
    fprintf(stderr, "bundle-run: %s\n", kiln_status_message(st));
    return 1;
  }
  printf("%s: ran in %.3f ms\n", model->name, first);
  if (bench > 0) {
    double *times = calloc(bench, sizeof *times);
    for (int r = 0; r < bench; ++r) {
      kiln_tensor **again = calloc(n_out + 1, sizeof *again);
      double t0 = now_ms();
      st = execute(model, inputs, n_in, again, n_out);
      times[r] = now_ms() - t0;
      for (int k = 0; k < n_out; ++k)
        kiln_tensor_free(again[k]);
      free(again);
    }
    for (int a = 0; a < bench; ++a) /* insertion sort: a few hundred runs at most */
      for (int b = a; b > 0 && times[b] < times[b - 1]; --b) {
        double x = times[b]; times[b] = times[b - 1]; times[b - 1] = x;
      }
    printf("bench: runs=%d median_ms=%.3f min_ms=%.3f\n", bench, times[bench / 2], times[0]);
    free(times);
  }
  int failures = 0;
  for (int k = 0; k < n_out; ++k) {
    proto_tensor ref;
    snprintf(path, sizeof path, "%s/output_%d.pb", dir, k);
    if (!load_tensor(path, &ref)) {
      printf("output %d '%s': no reference\n", k, model->outputs[k].name);
      continue;
    }
    int64_t n = kiln_tensor_num_elements(outputs[k]);
    int32_t dtype = kiln_tensor_dtype(outputs[k]);
    if (ref.dtype != dtype || ref.bytes != kiln_tensor_num_bytes(outputs[k])) {
      printf("output %d '%s': FAIL (reference has type %d, %zu bytes; got type %d, %zu bytes)\n",
             k, model->outputs[k].name, ref.dtype, ref.bytes, dtype,
             kiln_tensor_num_bytes(outputs[k]));
      ++failures;
      continue;
    }
    double worst = 0;
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      double got = element(kiln_tensor_data(outputs[k]), dtype, i);
      double want = element(ref.data, dtype, i);
      /* Equal values match, infinities too (the max of an empty axis is
       * -inf, and -inf - -inf is NaN). */
      double err = got == want ? 0 : fabs(got - want);
      if (err > worst || isnan(got) != isnan(want))
        worst = isnan(err) ? INFINITY : err;
      if (got != want && !(err <= atol + rtol * fabs(want)) && !(isnan(got) && isnan(want)))
        ++bad;
    }
    printf("output %d '%s': %s (%lld elements, max abs error %.3g, %lld beyond tolerance)\n", k,
           model->outputs[k].name, bad ? "FAIL" : "ok", (long long)n, worst, (long long)bad);
    failures += bad != 0;
    free(ref.data);
  }
  for (int i = 0; i < n_in; ++i)
    kiln_tensor_free(inputs[i]);
  for (int k = 0; k < n_out; ++k)
    kiln_tensor_free(outputs[k]);
  free(inputs);
  free(outputs);
  kiln_cuda_model_free(gpu_model);
  kiln_cuda_device_close(gpu);
  return failures ? 1 : 0;
}
