//===- Storage.h - Storage-type codec of kernel buffers ---------*- C++ -*-===//
//
// The one place where a value becomes the bytes of a kernel buffer and back
// (f64, f32, f16, bf16; round to nearest, ties to even). The reference
// interpreter rounds through it, the harness fills and reads buffers
// through it.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_STORAGE_STORAGE_H
#define FLEXSN_STORAGE_STORAGE_H

#include "mlir/IR/Types.h"

#include <cstdint>

namespace mlir {
namespace flexsn {

/// Bytes per element of storage type `type` (a float type).
unsigned storageBytes(Type type);

/// Writes `x` rounded to float type `type` at `dst`.
void encodeStorage(double x, Type type, uint8_t *dst);

/// Reads one element of float type `type` at `src`.
double decodeStorage(const uint8_t *src, Type type);

/// Rounds `x` to the nearest value of float type `type` (f16, bf16, f32,
/// f64; other types unchanged), ties to even.
double roundToType(double x, Type type);

} // namespace flexsn
} // namespace mlir

#endif // FLEXSN_STORAGE_STORAGE_H
