# -*- Python -*-
import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "MOE"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.moe_obj_root, "test")

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(
    ["moe-opt", "moe-translate", "moe-compile", "moe-run", "moe-train", "moe-plan", "moert-cuda-test",
     "mlir-runner"],
    [config.moe_tools_dir, config.llvm_tools_dir]
)

# Runtime libraries that mlir-runner loads for the numeric tests.
for lib in ["mlir_runner_utils", "mlir_c_runner_utils"]:
    config.substitutions.append(
        ("%" + lib, os.path.join(config.llvm_lib_dir, "lib" + lib + ".so"))
    )

# Debian's interpreter has numpy; the one running lit may not.
config.substitutions = [
    (key, "/usr/bin/python3" if key == "%python" else value)
    for key, value in config.substitutions
]

# The plugin that loads the moe dialect and passes into the system mlir-opt.
config.substitutions.append(
    ("%moe_plugin", os.path.join(config.moe_obj_root, "lib", "MoEPlugin.so"))
)

# The model corpus that the importer tests read (made by test/corpus scripts).
config.substitutions.append(
    ("%corpus", os.path.join(config.test_source_root, "corpus"))
)

# `%limit_memory_mb N cmd args...`: runs cmd with its memory bounded to N MB,
# so that a test of a size bound fails at once if the bound is lost. Plain
# builds cap the address space (ulimit -v); an AddressSanitizer tree caps
# what the process allocates instead (below), since ASan's shadow memory
# reserves terabytes of address space at startup, beyond any such cap.
limit_memory = "sh -c 'ulimit -v $(($0 * 1024)); exec \"$@\"'"

# End-to-end runs: the tools directory, and mpirun allowed to start more
# ranks than cores (CI has two) and to run as root in containers.
config.substitutions.append(("%moe_bin", config.moe_tools_dir))
for var in ["OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM",
            "OMPI_MCA_rmaps_base_oversubscribe"]:
    config.environment[var] = "1"

# `cuda`: the CUDA backend was built (a CUDA toolkit and NCCL were found).
# `cuda-gpu`: an NVIDIA GPU and driver are here too, so its code can run.
if config.moe_have_cuda:
    config.available_features.add("cuda")
    if os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/nvidia0"):
        config.available_features.add("cuda-gpu")

# Sanitized trees (MOE_SANITIZE; scripts/test-sanitized.sh): the options
# every instrumented program runs with, whoever starts it (lit, the Python
# drivers, mpirun). allow_user_poisoning=0: LLVM's BumpPtrAllocator poisons
# its free space in instrumented code only, and the uninstrumented libMLIR
# allocates from the same allocators (an MLIRContext's) without
# unpoisoning, a false use-after-poison. Leaks are not checked here: Open
# MPI keeps memory allocated by the components it loads and unloads in
# MPI_Init, whose stacks ASan's fast unwinder cannot attribute (addresses in
# unloaded modules, or in whatever was loaded there since), so no
# suppression holds for every run; the fuzz targets check leaks
# (test/fuzz, with fuzz/lsan.supp).
if config.moe_sanitize:
    import glob
    import platform

    sanitizers = config.moe_sanitize.split(";")
    config.available_features.add("sanitized")
    symbolizer = os.path.join(config.llvm_tools_dir, "llvm-symbolizer")

    def with_user_options(var, options):
        # The caller's own options come last and win.
        user = os.environ.get(var)
        return ":".join(options + ([user] if user else []))

    if "address" in sanitizers:
        config.available_features.add("asan")
        config.environment["ASAN_OPTIONS"] = with_user_options(
            "ASAN_OPTIONS",
            ["detect_leaks=0", "allow_user_poisoning=0", "abort_on_error=0",
             "external_symbolizer_path=" + symbolizer])
        config.environment["LSAN_OPTIONS"] = with_user_options(
            "LSAN_OPTIONS",
            ["suppressions=" + os.path.join(config.moe_src_root, "fuzz",
                                            "lsan.supp"),
             "print_suppressions=0"])
        # A memory bound is ASan's: the resident set (checked by a
        # background thread) and any one allocation, each at most N MB.
        limit_memory = ("sh -c 'export ASAN_OPTIONS=\"$ASAN_OPTIONS:"
                        "hard_rss_limit_mb=$0:max_allocation_size_mb=$0\"; "
                        "exec \"$@\"'")
        # The plugin is instrumented and the system mlir-opt that loads it
        # is not: the sanitizer runtime goes in first, as a shared library.
        runtimes = glob.glob(os.path.join(
            config.llvm_lib_dir, "clang", "*", "lib", "linux",
            "libclang_rt.asan-%s.so" % platform.machine()))
        if runtimes:
            llvm_config.add_tool_substitutions([ToolSubst(
                "mlir-opt", command="env LD_PRELOAD=%s %s" % (
                    runtimes[0],
                    os.path.join(config.llvm_tools_dir, "mlir-opt")))])
    if "undefined" in sanitizers:
        config.available_features.add("ubsan")
        config.environment["UBSAN_OPTIONS"] = with_user_options(
            "UBSAN_OPTIONS",
            ["print_stacktrace=1", "halt_on_error=1",
             "external_symbolizer_path=" + symbolizer])

config.substitutions.append(("%limit_memory_mb", limit_memory))

# `moe-tools`: the tools are built here (scripts/test.sh builds only the fuzz
# targets of the sanitized tree, and runs test/fuzz in it).
if all(os.path.exists(os.path.join(config.moe_tools_dir, t))
       for t in ["moe-opt", "moe-translate", "moe-compile", "moe-run", "moe-train",
                 "moe-plan"]):
    config.available_features.add("moe-tools")

# `fuzzers`: this tree has the libFuzzer targets (MOE_ENABLE_FUZZERS), which
# test/fuzz runs briefly over their seeds.
fuzzers = ["onnx", "onnx-proto", "torchscript", "mlir", "npy", "smp-config",
           "manifest"]
if config.moe_enable_fuzzers and all(
        os.path.exists(os.path.join(config.moe_tools_dir, "moe-fuzz-" + f))
        for f in fuzzers):
    config.available_features.add("fuzzers")
# Where the seed gatherer and the dictionaries are, and the options of a
# short run (scripts/fuzz.sh makes the long ones): a fixed seed, and a number
# of runs that each test gives (some 10 seconds' worth), so that a run in CI
# is the same run everywhere and what it finds reproduces; the time limit is
# only a guard.
config.substitutions.append(
    ("%fuzz_src", os.path.join(config.moe_src_root, "fuzz")))
config.substitutions.append(
    ("%fuzz_short", "-seed=1 -max_total_time=60 -rss_limit_mb=2048 "
                    "-timeout=10 -print_final_stats=1"))
