# Rewrites the link interface of Debian's exported MLIR targets so that nothing
# we build depends on libLLVM.so or libMLIR.so at run time.
#
# Debian builds LLVM with LLVM_LINK_LLVM_DYLIB=ON: every exported MLIR target
# ends its INTERFACE_LINK_LIBRARIES with `LLVM` (the dylib), and a few
# (ExecutionEngine, JitRunner, MlirOptMain) also list `MLIR` (the MLIR dylib).
# We replace `LLVM` by the static component archives we need and drop `MLIR`
# (our targets name the static MLIR libraries they use themselves).

set(LLVM_LINK_LLVM_DYLIB OFF)

set(FLEXSN_LLVM_COMPONENTS
  Core Support Demangle TargetParser BinaryFormat Analysis TransformUtils
  IRReader AsmParser BitReader BitWriter Linker Passes ipo Target MC
  CodeGen AsmPrinter SelectionDAG Object FrontendOpenMP FrontendOffloading
  NVPTX X86 OrcJIT ExecutionEngine JITLink RuntimeDyld OrcTargetProcess
  PerfJITEvents)
llvm_map_components_to_libnames(FLEXSN_LLVM_STATIC_LIBS ${FLEXSN_LLVM_COMPONENTS})

find_library(FLEXSN_ZSTD_LIB NAMES libzstd.a zstd)
find_library(FLEXSN_Z_LIB NAMES z)

add_library(FlexSNLLVMStatic INTERFACE)
target_link_libraries(FlexSNLLVMStatic INTERFACE ${FLEXSN_LLVM_STATIC_LIBS})
if(FLEXSN_ZSTD_LIB)
  target_link_libraries(FlexSNLLVMStatic INTERFACE ${FLEXSN_ZSTD_LIB})
endif()
if(FLEXSN_Z_LIB)
  target_link_libraries(FlexSNLLVMStatic INTERFACE ${FLEXSN_Z_LIB})
endif()
target_link_libraries(FlexSNLLVMStatic INTERFACE pthread dl)

foreach(tgt IN LISTS MLIR_EXPORTED_TARGETS)
  if(NOT TARGET ${tgt})
    continue()
  endif()
  get_target_property(type ${tgt} TYPE)
  if(type STREQUAL "EXECUTABLE")
    continue()
  endif()
  get_target_property(libs ${tgt} INTERFACE_LINK_LIBRARIES)
  if(NOT libs)
    continue()
  endif()
  set(new_libs)
  foreach(lib IN LISTS libs)
    if(lib STREQUAL "LLVM" OR lib STREQUAL "$<LINK_ONLY:LLVM>")
      list(APPEND new_libs FlexSNLLVMStatic)
    elseif(lib STREQUAL "MLIR" OR lib STREQUAL "$<LINK_ONLY:MLIR>")
      # dropped: the static MLIR libraries are named by our own targets
    else()
      list(APPEND new_libs "${lib}")
    endif()
  endforeach()
  set_target_properties(${tgt} PROPERTIES INTERFACE_LINK_LIBRARIES "${new_libs}")
endforeach()
