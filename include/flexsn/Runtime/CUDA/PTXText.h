//===- PTXText.h - Module-level edits of PTX text ---------------*- C++ -*-===//
//
// PTX as the LLVM NVPTX back end prints it, read as a sequence of top-level
// statements (directives, declarations, `.entry` and `.func` definitions):
// one entry's module cut out of a program, and per-entry modules merged into
// one program. Pure text: no CUDA and no MLIR needed.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_RUNTIME_CUDA_PTXTEXT_H
#define FLEXSN_RUNTIME_CUDA_PTXTEXT_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace mlir {
namespace flexsn {
namespace cuda {

/// `ptx` with the definitions of every `.entry` but `entry` left out: a
/// module the driver compiles in a fraction of the time of the whole when
/// the program has several kernels (module-scope declarations stay). None
/// when `ptx` defines no entry `entry` or its braces do not balance.
std::optional<std::string> extractPTXEntry(llvm::StringRef ptx,
                                           llvm::StringRef entry);

/// One PTX module holding every statement of `modules` (each a whole
/// module, as compiled one entry at a time): the header (`.version`,
/// `.target`, `.address_size`) once, each declaration once, every entry.
/// A `.func` a later module defines with another body than an earlier one
/// (LLVM optimizes a libdevice helper per entry) is renamed in that module.
/// None when the headers differ, an entry is defined twice, a module-scope
/// variable is declared twice differently, or braces do not balance.
std::optional<std::string> mergePTXModules(llvm::ArrayRef<std::string> modules);

} // namespace cuda
} // namespace flexsn
} // namespace mlir

#endif // FLEXSN_RUNTIME_CUDA_PTXTEXT_H
