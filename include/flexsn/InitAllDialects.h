//===- InitAllDialects.h - Register every dialect flexsn tools use -*- C++ -*-===//

#ifndef FLEXSN_INITALLDIALECTS_H
#define FLEXSN_INITALLDIALECTS_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace flexsn {
/// Adds the flexsn dialect and every upstream dialect that a scan body or
/// one of our pipelines produces, with their interface models.
void registerAllDialects(mlir::DialectRegistry &registry);
} // namespace flexsn

#endif // FLEXSN_INITALLDIALECTS_H
