# -*- Python -*-
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "MOE"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.moe_obj_root, "test")

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(
    ["moe-opt", "moe-translate", "moe-compile", "moe-run", "moert-cuda-test",
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
