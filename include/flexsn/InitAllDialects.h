//===- InitAllDialects.h - Register every dialect flexsn tools use -*- C++ -*-===//

#ifndef FLEXSN_INITALLDIALECTS_H
#define FLEXSN_INITALLDIALECTS_H

#include "mlir/IR/DialectRegistry.h"

namespace mlir {
namespace flexsn {
/// Adds the flexsn dialect and every upstream dialect that a scan body or
/// one of our pipelines produces, with their interface models.
void registerAllDialects(DialectRegistry &registry);
} // namespace flexsn
} // namespace mlir

#endif // FLEXSN_INITALLDIALECTS_H
