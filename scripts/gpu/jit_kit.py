#!/usr/bin/python3
"""Carries `kiln-run --device cuda` (the JIT path) to a GPU machine that has
no LLVM/MLIR, in parts that each fit the 64 MiB that travels per call.

Here (a built tree):
    scripts/gpu/jit_kit.py pack --out build/gpu-jit-llvm --part llvm          (27 MiB)
    scripts/gpu/jit_kit.py pack --out build/gpu-jit-rest --part rest \\
        --models squeezenet1_1,encoder4                                        (54 MiB)
    scripts/gpu/jit_kit.py pack --out build/gpu-jit-m1 --part models \\
        --models mobilenet_v2,mlp_gelu                                         (47 MiB)
    scripts/gpu/jit_kit.py pack --out build/gpu-jit-m2 --part models --models resnet18
There, one part per call (carry=["build/gpu-jit-llvm"], ...), in calls close
enough together that the machine stays warm (what is unpacked lives under
/tmp/kiln-jit while it does):
    python3 scripts/gpu/jit_kit.py run build/gpu-jit-llvm $OUT
    python3 scripts/gpu/jit_kit.py run build/gpu-jit-rest $OUT
    python3 scripts/gpu/jit_kit.py run build/gpu-jit-m1 $OUT
    python3 scripts/gpu/jit_kit.py run build/gpu-jit-m2 $OUT

`llvm` is libLLVM; `rest` is kiln-run, libkiln, the runtime, libMLIR and the
other libraries kiln-run loads (not glibc), CUDA's libdevice, and models;
`models` is models only. `run` unpacks a part's libraries into
/tmp/kiln-jit/lib, and once every library kiln-run needs is there runs each
carried model through `kiln-run --device cuda --check --bench` (the
cuda.model.* tests' command) and writes OUT/jit-PART.json.
"""
import argparse
import json
import lzma
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED = os.path.join(os.path.dirname(ROOT), "shared", "models")
BUILD = os.path.join(ROOT, "build")
UNPACKED = "/tmp/kiln-jit"
# Left to the machine: the C library and the loader.
SYSTEM = ("libc.so", "libm.so", "libdl.so", "libpthread.so", "librt.so", "ld-linux", "linux-vdso")


def libraries(binary):
    """The shared libraries `binary` loads, by soname, with their paths."""
    out = subprocess.run(["ldd", binary], check=True, capture_output=True, text=True).stdout
    libs = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] == "=>" and not parts[0].startswith(SYSTEM):
            libs[parts[0]] = parts[2]
    return libs


def pack(args):
    out = os.path.abspath(args.out)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(os.path.join(out, "lib"))
    kiln_run = os.path.join(BUILD, "bin", "kiln-run")
    libs = libraries(kiln_run)
    if args.part == "llvm":
        chosen = {k: v for k, v in libs.items() if k.startswith("libLLVM")}
    elif args.part == "rest":
        chosen = {k: v for k, v in libs.items() if not k.startswith("libLLVM")}
        shutil.copy(kiln_run, os.path.join(out, "kiln-run"))
        libdevice = "/usr/local/cuda/nvvm/libdevice/libdevice.10.bc"
        if os.path.exists(libdevice):
            os.makedirs(os.path.join(out, "cuda", "nvvm", "libdevice"))
            shutil.copy(libdevice, os.path.join(out, "cuda", "nvvm", "libdevice"))
    else:
        chosen = {}
    for soname, path in sorted(chosen.items()):
        print("pack", soname, flush=True)
        with open(path, "rb") as f, lzma.open(os.path.join(out, "lib", soname + ".xz"), "wb",
                                              preset=9) as g:
            shutil.copyfileobj(f, g)
    for name in filter(None, args.models.split(",")):
        src = os.path.join(SHARED, name)
        dst = os.path.join(out, "models", name)
        os.makedirs(dst)
        shutil.copy(os.path.join(src, "model.onnx"), dst)
        shutil.copytree(os.path.join(src, "test_data_set_0"), os.path.join(dst, "test_data_set_0"))
    manifest = {"part": args.part, "needs": sorted(libs), "libs": sorted(chosen)}
    json.dump(manifest, open(os.path.join(out, "manifest.json"), "w"), indent=1)
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(out) for f in fs)
    print(f"{out}: {total / 2**20:.1f} MiB")
    if total > 60 * 2**20:
        sys.exit("over 60 MiB: carry fewer models in this part")


def run(args):
    kit = os.path.abspath(args.kit)
    os.makedirs(args.out, exist_ok=True)
    manifest = json.load(open(os.path.join(kit, "manifest.json")))
    lib = os.path.join(UNPACKED, "lib")
    os.makedirs(lib, exist_ok=True)
    for soname in manifest["libs"]:
        target = os.path.join(lib, soname)
        if not os.path.exists(target):
            with lzma.open(os.path.join(kit, "lib", soname + ".xz"), "rb") as f, \
                    open(target, "wb") as g:
                shutil.copyfileobj(f, g)
    if os.path.exists(os.path.join(kit, "kiln-run")):
        shutil.copy(os.path.join(kit, "kiln-run"), UNPACKED)
        os.chmod(os.path.join(UNPACKED, "kiln-run"), 0o755)
    if os.path.exists(os.path.join(kit, "cuda")):
        shutil.copytree(os.path.join(kit, "cuda"), os.path.join(UNPACKED, "cuda"), dirs_exist_ok=True)
    result = {"part": manifest["part"], "missing": [], "models": {}}
    missing = [s for s in manifest["needs"] if not os.path.exists(os.path.join(lib, s))]
    binary = os.path.join(UNPACKED, "kiln-run")
    if missing or not os.path.exists(binary):
        result["missing"] = missing + ([] if os.path.exists(binary) else ["kiln-run"])
        print("unpacked; still missing:", result["missing"])
    else:
        env = dict(os.environ, LD_LIBRARY_PATH=lib, CUDA_HOME=os.path.join(UNPACKED, "cuda"))
        ldd = subprocess.run(["ldd", binary], capture_output=True, text=True, env=env)
        result["ldd"] = ldd.stdout
        models = os.path.join(kit, "models")
        for name in sorted(os.listdir(models)) if os.path.isdir(models) else []:
            d = os.path.join(models, name)
            data = os.path.join(d, "test_data_set_0")
            argv = [binary, os.path.join(d, "model.onnx"), "--device", "cuda", "--inputs", data,
                    "--check", data, "--atol", "1e-3", "--rtol", "1e-3", "--bench", "20"]
            p = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900)
            result["models"][name] = {"rc": p.returncode, "out": (p.stdout + p.stderr)[-3000:]}
            print(name, "rc", p.returncode, flush=True)
            print((p.stdout + p.stderr)[-1500:], flush=True)
    json.dump(result, open(os.path.join(args.out, f"jit-{manifest['part']}.json"), "w"), indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pack")
    p.add_argument("--out", required=True)
    p.add_argument("--part", choices=["llvm", "rest", "models"], required=True)
    p.add_argument("--models", default="", help="shared models to carry, comma-separated")
    r = sub.add_parser("run")
    r.add_argument("kit")
    r.add_argument("out")
    args = ap.parse_args()
    pack(args) if args.command == "pack" else run(args)


if __name__ == "__main__":
    main()
