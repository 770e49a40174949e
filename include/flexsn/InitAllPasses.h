//===- InitAllPasses.h - Register every pass flexsn tools use ---*- C++ -*-===//

#ifndef FLEXSN_INITALLPASSES_H
#define FLEXSN_INITALLPASSES_H

namespace mlir {
namespace flexsn {
/// Registers flexsn's passes and pipelines and the upstream passes they use
/// (for flexsn-opt and the C API).
void registerAllPasses();
} // namespace flexsn
} // namespace mlir

#endif // FLEXSN_INITALLPASSES_H
