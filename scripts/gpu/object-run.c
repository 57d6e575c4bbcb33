/* Runs a CUDA host object (kilnc --target=nvptx64-nvidia-cuda -o model.o)
 * through libkiln_runtime alone, for machines that have a GPU but no
 * LLVM/MLIR (kiln-run needs both). scripts/gpu/prepare.py links one such
 * runner per model; scripts/gpu/device.py feeds it the ONNX test data and
 * compares what it writes.
 *
 *   RUNNER [--weights FILE] [--runs N] [--warmup N] IN.bin... -- OUT.bin:BYTES...
 *   RUNNER --dump-weights FILE
 *
 * Inputs are raw row-major bytes, in graph order; each output is written to
 * its file. With --runs, the model then runs N more times and the runner
 * prints the median device time of one run (CUDA events around it) and the
 * median wall time (launches + synchronisation) in milliseconds.
 * --weights takes the weights blob from a file instead of the object, for
 * objects of one model at several shapes that share it, and so that the
 * kit that travels to the GPU machine holds each model's weights once
 * (prepare.py takes them out of the runner with --dump-weights). */
#include "kiln/cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

KILN_CUDA_DECLARE_OBJECT(kiln_entry);

#define MAX_BUFFERS 64

static int fail(kiln_status *s, const char *what) {
  fprintf(stderr, "error: %s: %s\n", what, kiln_status_message(s));
  kiln_status_free(s);
  return 1;
}

static void *read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  void *data = malloc(n > 0 ? (size_t)n : 1);
  if (data && n > 0 && fread(data, 1, (size_t)n, f) != (size_t)n) {
    free(data);
    data = NULL;
  }
  fclose(f);
  *size = (size_t)n;
  return data;
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--dump-weights")) {
    FILE *f = fopen(argv[2], "wb");
    size_t n = (size_t)kiln_entry_weights_size;
    if (!f || (n && fwrite(kiln_entry_weights, 1, n, f) != n) || fclose(f)) {
      fprintf(stderr, "error: cannot write %s\n", argv[2]);
      return 1;
    }
    return 0;
  }
  const char *weights_path = NULL;
  int runs = 0, warmup = 5, i = 1;
  for (; i < argc && strncmp(argv[i], "--", 2) == 0 && strcmp(argv[i], "--") != 0; i += 2) {
    if (i + 1 >= argc) break;
    if (!strcmp(argv[i], "--weights")) weights_path = argv[i + 1];
    else if (!strcmp(argv[i], "--runs")) runs = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--warmup")) warmup = atoi(argv[i + 1]);
    else {
      fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }
  const char *in_paths[MAX_BUFFERS], *out_paths[MAX_BUFFERS];
  size_t in_bytes[MAX_BUFFERS], out_bytes[MAX_BUFFERS];
  void *in_data[MAX_BUFFERS];
  int num_in = 0, num_out = 0;
  for (; i < argc && strcmp(argv[i], "--") != 0; ++i) {
    if (num_in == MAX_BUFFERS) return 2;
    in_paths[num_in] = argv[i];
    in_data[num_in] = read_file(argv[i], &in_bytes[num_in]);
    if (!in_data[num_in]) {
      fprintf(stderr, "error: cannot read input %s\n", argv[i]);
      return 1;
    }
    ++num_in;
  }
  for (++i; i < argc; ++i) {
    char *colon = strrchr(argv[i], ':');
    if (!colon || num_out == MAX_BUFFERS) {
      fprintf(stderr, "error: outputs are PATH:BYTES, got %s\n", argv[i]);
      return 2;
    }
    *colon = '\0';
    out_paths[num_out] = argv[i];
    out_bytes[num_out++] = (size_t)strtoull(colon + 1, NULL, 10);
  }
  if (num_out == 0) {
    fprintf(stderr, "usage: %s [--weights F] [--runs N] [--warmup N] IN... -- OUT:BYTES...\n",
            argv[0]);
    return 2;
  }

  const void *weights = kiln_entry_weights;
  size_t weights_size = (size_t)kiln_entry_weights_size;
  if (weights_path) {
    size_t n = 0;
    weights = read_file(weights_path, &n);
    if (!weights || n != weights_size) {
      fprintf(stderr, "error: %s: expected %zu bytes of weights\n", weights_path, weights_size);
      return 1;
    }
  }

  kiln_cuda_device *dev = NULL;
  kiln_status *s = kiln_cuda_device_open(0, &dev);
  if (s) return fail(s, "open device");
  double t0 = now_ms();
  kiln_cuda_program *program = NULL;
  s = kiln_cuda_program_create(dev, kiln_entry_ptx, kiln_entry_kernels,
                               (size_t)kiln_entry_num_kernels, weights, weights_size,
                               (size_t)kiln_entry_workspace_size, &program);
  if (s) return fail(s, "program create");
  printf("device: %s (sm_%d); %lld kernels, %.1f MB weights, %.1f MB workspace; load %.1f ms\n",
         kiln_cuda_device_name(dev), kiln_cuda_device_compute_capability(dev),
         (long long)kiln_entry_num_kernels, weights_size / 1e6,
         kiln_entry_workspace_size / 1e6, now_ms() - t0);

  kiln_cuda_ptr buffers[MAX_BUFFERS * 2];
  for (int k = 0; k < num_in; ++k) {
    if ((s = kiln_cuda_malloc(dev, in_bytes[k], &buffers[k]))) return fail(s, "malloc");
    if ((s = kiln_cuda_copy_to_device(dev, buffers[k], in_data[k], in_bytes[k])))
      return fail(s, in_paths[k]);
  }
  for (int k = 0; k < num_out; ++k)
    if ((s = kiln_cuda_malloc(dev, out_bytes[k], &buffers[num_in + k]))) return fail(s, "malloc");
  size_t num_buffers = (size_t)(num_in + num_out);

  if ((s = kiln_cuda_program_run(program, kiln_entry, buffers, num_buffers)))
    return fail(s, "run");
  if ((s = kiln_cuda_synchronize(dev))) return fail(s, "synchronize");
  for (int k = 0; k < num_out; ++k) {
    void *host = malloc(out_bytes[k]);
    if ((s = kiln_cuda_copy_to_host(dev, host, buffers[num_in + k], out_bytes[k])))
      return fail(s, "copy out");
    FILE *f = fopen(out_paths[k], "wb");
    if (!f || fwrite(host, 1, out_bytes[k], f) != out_bytes[k]) {
      fprintf(stderr, "error: cannot write %s\n", out_paths[k]);
      return 1;
    }
    fclose(f);
    free(host);
  }

  if (runs > 0) {
    kiln_cuda_timer *timer = NULL;
    if ((s = kiln_cuda_timer_create(dev, &timer))) return fail(s, "timer");
    double *device_ms = calloc((size_t)runs, sizeof(double));
    double *wall_ms = calloc((size_t)runs, sizeof(double));
    for (int r = -warmup; r < runs; ++r) {
      double w0 = now_ms(), ms = 0;
      if ((s = kiln_cuda_timer_start(timer))) return fail(s, "timer start");
      if ((s = kiln_cuda_program_run(program, kiln_entry, buffers, num_buffers)))
        return fail(s, "run");
      if ((s = kiln_cuda_timer_stop(timer, &ms))) return fail(s, "timer stop");
      if (r >= 0) {
        device_ms[r] = ms;
        wall_ms[r] = now_ms() - w0;
      }
    }
    qsort(device_ms, (size_t)runs, sizeof(double), cmp_double);
    qsort(wall_ms, (size_t)runs, sizeof(double), cmp_double);
    printf("runs %d: device_median_ms %.4f wall_median_ms %.4f device_min_ms %.4f\n", runs,
           device_ms[runs / 2], wall_ms[runs / 2], device_ms[0]);
    kiln_cuda_timer_free(timer);
  }
  kiln_cuda_program_free(program);
  kiln_cuda_device_close(dev);
  return 0;
}
