#!/usr/bin/env python3
"""Train torchvision models for a few steps with PyTorch's native CUDA allocator and with stash's
pools (libstash_torch_alloc.so through torch.cuda.memory.CUDAPluggableAllocator), and print peak
reserved bytes, peak allocated bytes and step time side by side.

Each (model, allocator) pair runs in a fresh subprocess: PyTorch's allocator can only be swapped
before the first CUDA allocation of a process. Models use random weights and synthetic batches
(torch.randn images, random labels in [0, 1000)), SGD with momentum, as in data/traces/.

For stash's pools the figures come from stash_stats() (torch.cuda.max_memory_reserved only sees
the native allocator); each step is bracketed by stash_begin_iteration() / stash_end_iteration(),
so the arena records step 1 and replays the later ones from one planned block.

Without torch, torchvision or a CUDA device this says so and exits 0.
Exit status: 0 when every run finished (or nothing could run), 1 when a run failed, 2 on bad
arguments.
"""

import argparse
import ctypes
import glob
import json
import os
import statistics
import subprocess
import sys
import time

MODELS = ("resnet18", "vgg16")
ALLOCATORS = ("native", "caching", "arena", "async")
RESULT_TAG = "STASH_RESULT "
LIB_NAME = "libstash_torch_alloc.so"
REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


class StashStats(ctypes.Structure):
    """Mirror of stash_torch_stats (stash_torch_alloc.h): keep the two in step."""

    _fields_ = [
        ("in_use_bytes", ctypes.c_uint64),
        ("peak_in_use_bytes", ctypes.c_uint64),
        ("reserved_bytes", ctypes.c_uint64),
        ("peak_reserved_bytes", ctypes.c_uint64),
        ("fallbacks", ctypes.c_uint64),
        ("allocations", ctypes.c_uint64),
        ("failed_allocations", ctypes.c_uint64),
        ("budget_bytes", ctypes.c_uint64),
        ("iterations", ctypes.c_uint64),
        ("arena_bytes", ctypes.c_uint64),
        ("device", ctypes.c_int32),
        ("pool", ctypes.c_int32),
    ]


POOL_NAMES = {0: "none", 1: "caching", 2: "arena", 3: "async"}


def format_bytes(n):
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024.0 or unit == "TiB":
            return f"{value:.1f} {unit}" if unit != "B" else f"{int(value)} B"
        value /= 1024.0
    return str(n)


def find_library(explicit):
    """The shared library: --lib, $STASH_TORCH_ALLOC_LIB, or the newest build/*/ copy."""
    if explicit:
        return os.path.abspath(explicit) if os.path.isfile(explicit) else None
    env = os.environ.get("STASH_TORCH_ALLOC_LIB")
    if env:
        return os.path.abspath(env) if os.path.isfile(env) else None
    found = glob.glob(os.path.join(REPO_ROOT, "build", "*", "examples", "pytorch_allocator", LIB_NAME))
    return max(found, key=os.path.getmtime) if found else None


def load_stash(path):
    """ctypes bindings of the control entry points (the same .so PyTorch loaded: one state)."""
    lib = ctypes.CDLL(path)
    lib.stash_begin_iteration.restype = ctypes.c_int
    lib.stash_begin_iteration.argtypes = []
    lib.stash_end_iteration.restype = ctypes.c_int
    lib.stash_end_iteration.argtypes = []
    lib.stash_configure.restype = ctypes.c_int
    lib.stash_configure.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    lib.stash_stats.restype = ctypes.c_int
    lib.stash_stats.argtypes = [ctypes.POINTER(StashStats)]
    lib.stash_last_error.restype = ctypes.c_size_t
    lib.stash_last_error.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    return lib


def last_error(lib):
    buffer = ctypes.create_string_buffer(4096)
    lib.stash_last_error(buffer, len(buffer))
    return buffer.value.decode(errors="replace")


def stash_stats(lib):
    stats = StashStats()
    if lib.stash_stats(ctypes.byref(stats)) != 0:
        raise RuntimeError("stash_stats failed: " + last_error(lib))
    return stats


# --- one run, in its own process ------------------------------------------------------------------

def emit(result):
    print(RESULT_TAG + json.dumps(result), flush=True)


def build_model(torchvision, name):
    constructor = getattr(torchvision.models, name)
    try:
        return constructor(weights=None)  # torchvision >= 0.13
    except TypeError:
        return constructor(pretrained=False)


def worker(args):
    """Runs args.model under args.allocator and prints one RESULT_TAG line."""
    import torch  # noqa: imported here: the parent may have no torch

    result = {"model": args.model, "allocator": args.allocator}
    lib = None
    if args.allocator != "native":
        # Before anything touches CUDA: the allocator cannot change after the first allocation.
        allocator = torch.cuda.memory.CUDAPluggableAllocator(args.lib, "stash_malloc", "stash_free")
        torch.cuda.memory.change_current_allocator(allocator)
        lib = load_stash(args.lib)
        if lib.stash_configure(args.allocator.encode(), args.budget) != 0:
            result["error"] = "stash_configure: " + last_error(lib)
            emit(result)
            return 1
    import torchvision
    import torch.nn.functional as F

    # Fixed algorithms, so every step asks for the same workspaces (the arena's premise).
    torch.backends.cudnn.benchmark = False
    torch.manual_seed(0)
    device = torch.device("cuda")
    times = []
    try:
        model = build_model(torchvision, args.model).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        images = torch.randn(args.batch, 3, 224, 224, device=device)
        labels = torch.randint(0, 1000, (args.batch,), device=device)
        torch.cuda.synchronize()
        for _ in range(args.steps):
            if lib is not None and lib.stash_begin_iteration() != 0:
                raise RuntimeError("stash_begin_iteration: " + last_error(lib))
            start = time.perf_counter()
            loss = F.cross_entropy(model(images), labels)
            loss.backward()
            optimizer.step()
            # Gradients and the loss die inside the step, so the arena can plan them.
            optimizer.zero_grad(set_to_none=True)
            del loss
            torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
            if lib is not None and lib.stash_end_iteration() != 0:
                raise RuntimeError("stash_end_iteration: " + last_error(lib))
    except (RuntimeError, MemoryError) as e:  # torch's OutOfMemoryError is a RuntimeError
        message = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if lib is not None and last_error(lib):
            message += " | stash: " + last_error(lib)
        result["error"] = message
    result["first_step_ms"] = times[0] * 1e3 if times else None
    later = times[1:] if len(times) > 1 else times
    result["median_step_ms"] = statistics.median(later) * 1e3 if later else None
    result["steps_done"] = len(times)
    if lib is None:
        result["peak_reserved"] = torch.cuda.max_memory_reserved()
        result["peak_allocated"] = torch.cuda.max_memory_allocated()
    else:
        stats = stash_stats(lib)
        result["peak_reserved"] = stats.peak_reserved_bytes
        result["peak_allocated"] = stats.peak_in_use_bytes
        result["fallbacks"] = stats.fallbacks
        result["failed_allocations"] = stats.failed_allocations
        result["arena_bytes"] = stats.arena_bytes
        result["pool"] = POOL_NAMES.get(stats.pool, str(stats.pool))
    emit(result)
    return 1 if "error" in result else 0


# --- the driver -----------------------------------------------------------------------------------

def run_one(args, model, allocator):
    command = [sys.executable, os.path.abspath(__file__), "--worker", "--model", model,
               "--allocator", allocator, "--steps", str(args.steps), "--batch", str(args.batch),
               "--budget", str(args.budget)]
    if args.lib:
        command += ["--lib", args.lib]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"model": model, "allocator": allocator, "error": f"timed out after {args.timeout} s"}
    for line in done.stdout.splitlines():
        if line.startswith(RESULT_TAG):
            return json.loads(line[len(RESULT_TAG):])
    tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
    return {"model": model, "allocator": allocator,
            "error": f"worker exited with {done.returncode}: {tail}"}


def print_table(results):
    header = ("model", "allocator", "peak reserved", "peak allocated", "step (median)",
              "first step", "fallbacks")
    rows = []
    for r in results:
        ms = lambda v: "-" if v is None else f"{v:.1f} ms"  # noqa: E731
        rows.append((r["model"], r["allocator"], format_bytes(r.get("peak_reserved")),
                     format_bytes(r.get("peak_allocated")), ms(r.get("median_step_ms")),
                     ms(r.get("first_step_ms")), str(r.get("fallbacks", "-"))))
    widths = [max(len(str(x)) for x in column) for column in zip(header, *rows)]
    for row in [header] + rows:
        print("  ".join(str(x).ljust(w) for x, w in zip(row, widths)).rstrip())
    for r in results:
        if "error" in r:
            print(f"{r['model']} / {r['allocator']}: FAILED after {r.get('steps_done', 0)} steps: "
                  f"{r['error']}")


def parse_budget(text):
    units = {"": 1, "B": 1, "K": 1 << 10, "KiB": 1 << 10, "M": 1 << 20, "MiB": 1 << 20,
             "G": 1 << 30, "GiB": 1 << 30, "T": 1 << 40, "TiB": 1 << 40}
    if text in ("none", "0"):
        return 0
    digits = len(text) - len(text.lstrip("0123456789"))
    if digits == 0 or text[digits:] not in units:
        raise argparse.ArgumentTypeError(
            f"bad budget '{text}': expected bytes with an optional binary unit, e.g. 8GiB")
    return int(text[:digits]) * units[text[digits:]]


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=MODELS + ("all",), default="all")
    parser.add_argument("--allocators", default=",".join(ALLOCATORS),
                        help="comma-separated subset of " + ",".join(ALLOCATORS))
    parser.add_argument("--steps", type=int, default=10, help="training steps per run (>= 1)")
    parser.add_argument("--batch", type=int, default=32, help="images per batch (>= 1)")
    parser.add_argument("--budget", type=parse_budget, default=0,
                        help="cap for stash's pools, e.g. 6GiB (default: none)")
    parser.add_argument("--lib", help=f"path to {LIB_NAME} (default: $STASH_TORCH_ALLOC_LIB, "
                                      "else the newest build/*/examples/pytorch_allocator copy)")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per run")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--allocator", choices=ALLOCATORS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.steps < 1 or args.batch < 1:
        parser.error("--steps and --batch must be at least 1")

    if args.worker:
        if args.model == "all" or args.allocator is None:
            parser.error("--worker needs one --model and an --allocator")
        return worker(args)

    allocators = [a.strip() for a in args.allocators.split(",") if a.strip()]
    unknown = [a for a in allocators if a not in ALLOCATORS]
    if unknown or not allocators:
        parser.error(f"--allocators: unknown {unknown}; choose from {','.join(ALLOCATORS)}")

    try:
        import torch
    except ImportError:
        print("train_torchvision: PyTorch is not installed for this Python "
              f"({sys.executable}); nothing to run.")
        return 0
    try:
        import torchvision  # noqa: F401
    except ImportError:
        print("train_torchvision: torchvision is not installed; nothing to run.")
        return 0
    if not torch.cuda.is_available():
        print(f"train_torchvision: torch {torch.__version__} sees no CUDA device; nothing to run.")
        return 0
    stash_allocators = [a for a in allocators if a != "native"]
    if stash_allocators and not hasattr(torch.cuda.memory, "CUDAPluggableAllocator"):
        print(f"train_torchvision: torch {torch.__version__} has no CUDAPluggableAllocator "
              "(PyTorch 2.0 or later needed); running the native allocator only.")
        allocators = [a for a in allocators if a == "native"]
    elif stash_allocators:
        args.lib = find_library(args.lib)
        if args.lib is None:
            print(f"train_torchvision: {LIB_NAME} not found (build the stash_torch_alloc target, "
                  "or pass --lib); running the native allocator only.")
            allocators = [a for a in allocators if a == "native"]
    if not allocators:
        return 0

    models = MODELS if args.model == "all" else (args.model,)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}, batch {args.batch}, "
          f"{args.steps} steps" + (f", stash library {args.lib}" if args.lib else "")
          + (f", budget {format_bytes(args.budget)}" if args.budget else ""), flush=True)
    results = []
    for model in models:
        for allocator in allocators:
            results.append(run_one(args, model, allocator))
    print_table(results)
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
