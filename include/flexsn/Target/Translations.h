//===- Translations.h - flexsn translations ---------------------*- C++ -*-===//

#ifndef FLEXSN_TARGET_TRANSLATIONS_H
#define FLEXSN_TARGET_TRANSLATIONS_H

namespace mlir {
namespace flexsn {

/// Registers the translations flexsn-translate offers, all reading the
/// PipelineOptions of `--options`:
///   --flexsn-to-ptx           PTX of every kernel
///   --flexsn-to-manifest      the CUDA kernel manifest
///   --flexsn-to-cpu-manifest  the CPU kernel manifest
void registerFlexSNTranslations();

} // namespace flexsn
} // namespace mlir

#endif // FLEXSN_TARGET_TRANSLATIONS_H
