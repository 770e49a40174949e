//===- Storage.cpp - Storage-type codec of kernel buffers -----------------===//

#include "flexsn/Storage/Storage.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/APFloat.h"

#include <cstring>

using namespace mlir;
using namespace mlir::flexsn;

unsigned mlir::flexsn::storageBytes(Type type) {
  return type.getIntOrFloatBitWidth() / 8;
}

/// `x` converted to the semantics of a 16-bit float type.
static llvm::APFloat toHalfWidth(double x, Type type) {
  llvm::APFloat v(x);
  bool lost;
  v.convert(cast<FloatType>(type).getFloatSemantics(),
            llvm::APFloat::rmNearestTiesToEven, &lost);
  return v;
}

void mlir::flexsn::encodeStorage(double x, Type type, uint8_t *dst) {
  if (type.isF64()) {
    std::memcpy(dst, &x, 8);
  } else if (type.isF32()) {
    float f = static_cast<float>(x);
    std::memcpy(dst, &f, 4);
  } else {
    uint16_t bits = static_cast<uint16_t>(
        toHalfWidth(x, type).bitcastToAPInt().getZExtValue());
    std::memcpy(dst, &bits, 2);
  }
}

double mlir::flexsn::decodeStorage(const uint8_t *src, Type type) {
  if (type.isF64()) {
    double d;
    std::memcpy(&d, src, 8);
    return d;
  }
  if (type.isF32()) {
    float f;
    std::memcpy(&f, src, 4);
    return f;
  }
  uint16_t bits;
  std::memcpy(&bits, src, 2);
  llvm::APFloat v(cast<FloatType>(type).getFloatSemantics(),
                  llvm::APInt(16, bits));
  bool lost;
  v.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven,
            &lost);
  return v.convertToDouble();
}

double mlir::flexsn::roundToType(double x, Type type) {
  if (!isa<FloatType>(type) || type.isF64())
    return x;
  if (type.isF32())
    return static_cast<double>(static_cast<float>(x));
  uint8_t bytes[2];
  encodeStorage(x, type, bytes);
  return decodeStorage(bytes, type);
}
