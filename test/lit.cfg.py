# -*- Python -*-
# lit configuration of the flexsn regression tests.

import os
import shutil
import subprocess

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "FLEXSN"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.flexsn_obj_root, "test")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%flexsn_src_root", config.flexsn_src_root))
config.environment["FILECHECK_OPTS"] = "--enable-var-scope"

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
# Sanitizer builds (FLEXSN_ENABLE_SANITIZERS): LLVM's headers poison
# BumpPtrAllocator slabs in our instrumented code, the uninstrumented LLVM
# archives do not unpoison them; ignore user poisoning. Caller's options win.
config.environment["ASAN_OPTIONS"] = os.environ.get(
    "ASAN_OPTIONS", "allow_user_poisoning=0")
config.environment["UBSAN_OPTIONS"] = os.environ.get(
    "UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
llvm_config.use_default_substitutions()

llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.flexsn_tools_dir, append_path=True)

tool_dirs = [config.flexsn_tools_dir, config.llvm_tools_dir]
tools = ["flexsn-opt", "flexsn-translate", "flexsn-run", "flexsn-capi-test",
         "flexsn-runtime-test", "flexsn-mincut-test", "mlir-tblgen"]
llvm_config.add_tool_substitutions(tools, tool_dirs)
# MLIR's .td files, which ours include (test/Docs).
config.substitutions.append(
    ("%mlir_include", os.path.join(os.path.dirname(config.llvm_tools_dir), "include")))

# ptxas (CUDA toolkit) assembles the PTX we emit.
cuda_home = config.cuda_home or "/usr/local/cuda"
ptxas = os.path.join(cuda_home, "bin", "ptxas")
if os.path.exists(ptxas):
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))
    config.environment["CUDA_HOME"] = cuda_home


# A usable NVIDIA GPU (driver loaded and at least one device).
def _have_cuda_device():
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True,
                             text=True, timeout=20)
        return out.returncode == 0 and "GPU" in out.stdout
    except (OSError, subprocess.SubprocessError):
        return False


if _have_cuda_device():
    config.available_features.add("cuda")
