//===- FlexSNAttrs.cpp - FlexSN attributes --------------------------------===//
//
// The surrogate-gradient table (families, parameters, defaults, ranges), the
// `#flexsn.surrogate<...>` syntax, and the surrogate derivatives in double
// precision (used by the reference interpreter and by tests).
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/IR/FlexSNAttrs.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::flexsn;

#include "flexsn/Dialect/FlexSN/IR/FlexSNEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "flexsn/Dialect/FlexSN/IR/FlexSNAttrs.cpp.inc"

void FlexSNDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "flexsn/Dialect/FlexSN/IR/FlexSNAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// The surrogate table
//===----------------------------------------------------------------------===//

namespace {
constexpr ParamRange kAny = ParamRange::Any;
constexpr ParamRange kPos = ParamRange::Positive;

// Defaults follow SpikingJelly's constructors.
const SurrogateParamInfo kSigmoid[] = {{"alpha", 4.0, kPos}};
const SurrogateParamInfo kATan[] = {{"alpha", 2.0, kPos}};
const SurrogateParamInfo kPiecewiseQuadratic[] = {{"alpha", 1.0, kPos}};
const SurrogateParamInfo kPiecewiseExp[] = {{"alpha", 1.0, kPos}};
const SurrogateParamInfo kSoftSign[] = {{"alpha", 2.0, kPos}};
const SurrogateParamInfo kSuperSpike[] = {{"alpha", 1.0, kPos}};
const SurrogateParamInfo kErf[] = {{"alpha", 2.0, kPos}};
const SurrogateParamInfo kNonzeroSignLogAbs[] = {{"alpha", 1.0, kPos}};
const SurrogateParamInfo kPiecewiseLeakyReLU[] = {{"w", 1.0, kPos},
                                                  {"c", 0.01, kAny}};
const SurrogateParamInfo kSquarewave[] = {
    {"n", 2.0, ParamRange::PositiveInteger}, {"T_period", 8.0, kPos}};
const SurrogateParamInfo kS2NN[] = {{"alpha", 4.0, kPos}, {"beta", 1.0, kAny}};
const SurrogateParamInfo kQPseudoSpike[] = {
    {"alpha", 2.0, ParamRange::GreaterThanOne}};
const SurrogateParamInfo kLeakyKReLU[] = {{"leak", 0.0, kAny},
                                          {"k", 1.0, kAny}};
const SurrogateParamInfo kFakeNumericalGradient[] = {{"alpha", 0.3, kPos}};
const SurrogateParamInfo kLogTailedReLU[] = {{"alpha", 0.0, kAny}};
const SurrogateParamInfo kRect[] = {{"alpha", 1.0, kPos}};

const SurrogateInfo kSurrogateTable[] = {
    {SurrogateKind::Sigmoid, kSigmoid},
    {SurrogateKind::ATan, kATan},
    {SurrogateKind::PiecewiseQuadratic, kPiecewiseQuadratic},
    {SurrogateKind::PiecewiseExp, kPiecewiseExp},
    {SurrogateKind::SoftSign, kSoftSign},
    {SurrogateKind::SuperSpike, kSuperSpike},
    {SurrogateKind::Erf, kErf},
    {SurrogateKind::NonzeroSignLogAbs, kNonzeroSignLogAbs},
    {SurrogateKind::PiecewiseLeakyReLU, kPiecewiseLeakyReLU},
    {SurrogateKind::SquarewaveFourierSeries, kSquarewave},
    {SurrogateKind::S2NN, kS2NN},
    {SurrogateKind::QPseudoSpike, kQPseudoSpike},
    {SurrogateKind::LeakyKReLU, kLeakyKReLU},
    {SurrogateKind::FakeNumericalGradient, kFakeNumericalGradient},
    {SurrogateKind::LogTailedReLU, kLogTailedReLU},
    {SurrogateKind::Rect, kRect},
};
} // namespace

const SurrogateInfo &mlir::flexsn::getSurrogateInfo(SurrogateKind kind) {
  for (const SurrogateInfo &info : kSurrogateTable)
    if (info.kind == kind)
      return info;
  llvm_unreachable("surrogate kind missing from the table");
}

StringRef mlir::flexsn::describeParamRange(ParamRange range) {
  switch (range) {
  case ParamRange::Any:
    return "finite";
  case ParamRange::Positive:
    return "> 0";
  case ParamRange::GreaterThanOne:
    return "> 1";
  case ParamRange::PositiveInteger:
    return "an integer >= 1";
  }
  llvm_unreachable("unknown range");
}

bool mlir::flexsn::isInParamRange(ParamRange range, double value) {
  if (!std::isfinite(value))
    return false;
  switch (range) {
  case ParamRange::Any:
    return true;
  case ParamRange::Positive:
    return value > 0.0;
  case ParamRange::GreaterThanOne:
    return value > 1.0;
  case ParamRange::PositiveInteger:
    return value >= 1.0 && value == std::floor(value);
  }
  llvm_unreachable("unknown range");
}

//===----------------------------------------------------------------------===//
// SurrogateAttr
//===----------------------------------------------------------------------===//

SurrogateAttr SurrogateAttr::getDefault(MLIRContext *ctx, SurrogateKind kind) {
  SmallVector<double, 2> params;
  for (const SurrogateParamInfo &p : getSurrogateInfo(kind).params)
    params.push_back(p.defaultValue);
  return get(ctx, kind, params);
}

double SurrogateAttr::getParam(StringRef name) const {
  const SurrogateInfo &info = getSurrogateInfo(getKind());
  for (auto [idx, p] : llvm::enumerate(info.params))
    if (p.name == name)
      return getParams()[idx];
  llvm_unreachable("no such surrogate parameter");
}

LogicalResult
SurrogateAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      SurrogateKind kind, DenseF64ArrayAttr paramsAttr) {
  ArrayRef<double> params = paramsAttr.asArrayRef();
  const SurrogateInfo &info = getSurrogateInfo(kind);
  if (params.size() != info.params.size())
    return emitError() << "surrogate '" << stringifySurrogateKind(kind)
                       << "' takes " << info.params.size()
                       << " parameter(s), got " << params.size();
  for (auto [p, value] : llvm::zip_equal(info.params, params))
    if (!isInParamRange(p.range, value))
      return emitError() << "surrogate '" << stringifySurrogateKind(kind)
                         << "' parameter '" << p.name << "' must be "
                         << describeParamRange(p.range) << ", got " << value;
  return success();
}

Attribute SurrogateAttr::parse(AsmParser &parser, Type) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef kindName;
  if (parser.parseLess() || parser.parseKeyword(&kindName))
    return {};
  std::optional<SurrogateKind> kind = symbolizeSurrogateKind(kindName);
  if (!kind) {
    std::string known;
    for (const SurrogateInfo &info : kSurrogateTable)
      known += (known.empty() ? "" : ", ") +
               stringifySurrogateKind(info.kind).str();
    parser.emitError(loc) << "unknown surrogate '" << kindName
                          << "'; expected one of: " << known;
    return {};
  }
  const SurrogateInfo &info = getSurrogateInfo(*kind);
  SmallVector<double, 2> params;
  SmallVector<bool, 2> given(info.params.size(), false);
  for (const SurrogateParamInfo &p : info.params)
    params.push_back(p.defaultValue);

  while (succeeded(parser.parseOptionalComma())) {
    SMLoc nameLoc = parser.getCurrentLocation();
    StringRef name;
    Attribute literal;
    if (parser.parseKeyword(&name) || parser.parseEqual())
      return {};
    SMLoc valueLoc = parser.getCurrentLocation();
    // Integers (`n = 4`) and floats (`alpha = 0.5`, `c = -1e-2`) both read.
    if (parser.parseAttribute(literal))
      return {};
    double value;
    if (auto f = dyn_cast<FloatAttr>(literal)) {
      value = f.getValueAsDouble();
    } else if (auto i = dyn_cast<IntegerAttr>(literal)) {
      value = static_cast<double>(i.getValue().getSExtValue());
    } else {
      parser.emitError(valueLoc)
          << "surrogate parameter '" << name << "' must be a number";
      return {};
    }
    auto it = llvm::find_if(info.params, [&](const SurrogateParamInfo &p) {
      return p.name == name;
    });
    if (it == info.params.end()) {
      std::string known;
      for (const SurrogateParamInfo &p : info.params)
        known += (known.empty() ? "" : ", ") + p.name.str();
      parser.emitError(nameLoc)
          << "surrogate '" << kindName << "' has no parameter '" << name
          << "'; its parameters are: " << known;
      return {};
    }
    size_t idx = it - info.params.begin();
    if (given[idx]) {
      parser.emitError(nameLoc) << "parameter '" << name << "' given twice";
      return {};
    }
    given[idx] = true;
    params[idx] = value;
  }
  if (parser.parseGreater())
    return {};
  MLIRContext *ctx = parser.getContext();
  return getChecked([&] { return parser.emitError(loc); }, ctx, *kind,
                    DenseF64ArrayAttr::get(ctx, params));
}

void SurrogateAttr::print(AsmPrinter &printer) const {
  const SurrogateInfo &info = getSurrogateInfo(getKind());
  printer << "<" << stringifySurrogateKind(getKind());
  for (auto [p, value] :
       llvm::zip_equal(info.params, getParams().asArrayRef())) {
    printer << ", " << p.name << " = ";
    printer.printFloat(llvm::APFloat(value));
  }
  printer << ">";
}

double SurrogateAttr::derivative(double x) const {
  ArrayRef<double> p = getParams().asArrayRef();
  const double pi = M_PI;
  // alpha * sigmoid'(alpha * x) as alpha * e / (1 + e)^2, e =
  // exp(-|alpha * x|), as the IR rule builds it (AdjointRules.h).
  auto sigmoidGrad = [](double alpha, double x) {
    double e = std::exp(-std::abs(alpha) * std::abs(x));
    double r = 1.0 / (1.0 + e);
    return alpha * (e * (r * r));
  };
  switch (getKind()) {
  case SurrogateKind::Sigmoid:
    return sigmoidGrad(p[0], x);
  case SurrogateKind::ATan: {
    double ax = pi / 2.0 * p[0] * x;
    return p[0] / 2.0 / (1.0 + ax * ax);
  }
  case SurrogateKind::PiecewiseQuadratic:
    return std::abs(x) > 1.0 / p[0] ? 0.0 : p[0] - p[0] * p[0] * std::abs(x);
  case SurrogateKind::PiecewiseExp:
    return p[0] / 2.0 * std::exp(-p[0] * std::abs(x));
  case SurrogateKind::SoftSign: {
    double d = 1.0 + std::abs(p[0] * x);
    return p[0] / 2.0 / (d * d);
  }
  case SurrogateKind::SuperSpike: {
    double d = 1.0 + std::abs(x);
    return p[0] / (d * d);
  }
  case SurrogateKind::Erf:
    return p[0] / std::sqrt(pi) * std::exp(-p[0] * p[0] * x * x);
  case SurrogateKind::NonzeroSignLogAbs:
    return 1.0 / (1.0 / p[0] + std::abs(x));
  case SurrogateKind::PiecewiseLeakyReLU:
    return std::abs(x) < p[0] ? 1.0 / (2.0 * p[0]) : p[1];
  case SurrogateKind::SquarewaveFourierSeries: {
    double w = 2.0 * pi / p[1];
    double sum = 0.0;
    for (int i = 1; i < static_cast<int>(p[0]); ++i)
      sum += std::cos((2.0 * i - 1.0) * w * x);
    return 4.0 / p[1] * sum;
  }
  case SurrogateKind::S2NN:
    return x < 0.0 ? sigmoidGrad(p[0], x) : p[1] / (x + 1.0);
  case SurrogateKind::QPseudoSpike:
    return std::pow(1.0 + 2.0 / (p[0] - 1.0) * std::abs(x), -p[0]);
  case SurrogateKind::LeakyKReLU:
    return x >= 0.0 ? p[1] : p[0];
  case SurrogateKind::FakeNumericalGradient:
    return std::min((x >= 0.0 ? 1.0 : -1.0) / x, p[0]);
  case SurrogateKind::LogTailedReLU:
    return x <= 0.0 ? p[0] : (x <= 1.0 ? 1.0 : 1.0 / x);
  case SurrogateKind::Rect:
    return std::abs(x) < 0.5 / p[0] ? p[0] : 0.0;
  }
  llvm_unreachable("unknown surrogate kind");
}
