//===- FlexSNAttrs.td - FlexSN attributes ------------------*- tablegen -*-===//

#ifndef FLEXSN_DIALECT_FLEXSN_IR_FLEXSNATTRS_TD
#define FLEXSN_DIALECT_FLEXSN_IR_FLEXSNATTRS_TD

include "flexsn/Dialect/FlexSN/IR/FlexSNDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

// The surrogate-gradient families of SpikingJelly, one case each. The
// parameters, their defaults and their valid ranges live in one table in
// Surrogate.cpp (getSurrogateInfo).
def FlexSN_SurrogateKind : I32EnumAttr<"SurrogateKind",
    "surrogate-gradient family", [
      I32EnumAttrCase<"Sigmoid", 0, "sigmoid">,
      I32EnumAttrCase<"ATan", 1, "atan">,
      I32EnumAttrCase<"PiecewiseQuadratic", 2, "piecewise_quadratic">,
      I32EnumAttrCase<"PiecewiseExp", 3, "piecewise_exp">,
      I32EnumAttrCase<"SoftSign", 4, "soft_sign">,
      I32EnumAttrCase<"SuperSpike", 5, "super_spike">,
      I32EnumAttrCase<"Erf", 6, "erf">,
      I32EnumAttrCase<"NonzeroSignLogAbs", 7, "nonzero_sign_log_abs">,
      I32EnumAttrCase<"PiecewiseLeakyReLU", 8, "piecewise_leaky_relu">,
      I32EnumAttrCase<"SquarewaveFourierSeries", 9,
                      "squarewave_fourier_series">,
      I32EnumAttrCase<"S2NN", 10, "s2nn">,
      I32EnumAttrCase<"QPseudoSpike", 11, "q_pseudo_spike">,
      I32EnumAttrCase<"LeakyKReLU", 12, "leaky_k_relu">,
      I32EnumAttrCase<"FakeNumericalGradient", 13, "fake_numerical_gradient">,
      I32EnumAttrCase<"LogTailedReLU", 14, "log_tailed_relu">,
      I32EnumAttrCase<"Rect", 15, "rect">
    ]> {
  let cppNamespace = "::mlir::flexsn";
  let genSpecializedAttr = 0;
}

// What a kernel pointer, or an argument or result of a function made by
// flexsn-differentiate, holds in the terms of the function the user wrote:
// the value of `flexsn.role` and of a manifest argument's `meaning`.
def FlexSN_ArgMeaning : I32EnumAttr<"ArgMeaning", "argument meaning", [
      I32EnumAttrCase<"Input", 0, "input">,
      I32EnumAttrCase<"InitState", 1, "init_state">,
      I32EnumAttrCase<"Param", 2, "param">,
      I32EnumAttrCase<"Output", 3, "output">,
      I32EnumAttrCase<"StateSeq", 4, "state_seq">,
      I32EnumAttrCase<"FinalState", 5, "final_state">,
      // A body value the training forward saves for the backward.
      I32EnumAttrCase<"Saved", 6, "saved">,
      I32EnumAttrCase<"GradOutput", 7, "grad_output">,
      I32EnumAttrCase<"GradStateSeq", 8, "grad_state_seq">,
      I32EnumAttrCase<"GradFinalState", 9, "grad_final_state">,
      I32EnumAttrCase<"GradInput", 10, "grad_input">,
      I32EnumAttrCase<"GradInitState", 11, "grad_init_state">,
      I32EnumAttrCase<"GradParam", 12, "grad_param">,
      // Operands of a hand-written scan with lagged operands, and the sum of
      // a scan's final states over neurons: pointers of kernels whose
      // function carries no flexsn.role.
      I32EnumAttrCase<"Lagged", 13, "lagged">,
      I32EnumAttrCase<"LaggedInit", 14, "lagged_init">,
      I32EnumAttrCase<"SumState", 15, "sum_state">
    ]> {
  let cppNamespace = "::mlir::flexsn";
  let genSpecializedAttr = 0;
}

def FlexSN_SurrogateAttr : AttrDef<FlexSN_Dialect, "Surrogate"> {
  let mnemonic = "surrogate";
  let summary = "A surrogate gradient: its family and its parameters";
  let description = [{
    Names the function whose derivative stands in for the (zero almost
    everywhere) derivative of the Heaviside step in the backward pass.
    Parameters are named and may be omitted; an omitted parameter takes
    SpikingJelly's default. The printer always writes every parameter.

    | family | parameters (defaults) | g'(x) |
    |---|---|---|
    | `sigmoid` | alpha (4), > 0 | alpha * sg(alpha x) * (1 - sg(alpha x)) |
    | `atan` | alpha (2), > 0 | alpha / 2 / (1 + (pi/2 alpha x)^2) |
    | `piecewise_quadratic` | alpha (1), > 0 | max(0, alpha - alpha^2 abs(x)) |
    | `piecewise_exp` | alpha (1), > 0 | alpha / 2 * exp(-alpha abs(x)) |
    | `soft_sign` | alpha (2), > 0 | alpha / 2 / (1 + abs(alpha x))^2 |
    | `super_spike` | alpha (1), > 0 | alpha / (1 + abs(x))^2 |
    | `erf` | alpha (2), > 0 | alpha / sqrt(pi) * exp(-(alpha x)^2) |
    | `nonzero_sign_log_abs` | alpha (1), > 0 | 1 / (1/alpha + abs(x)) |
    | `piecewise_leaky_relu` | w (1) > 0, c (0.01) | 1/(2w) if abs(x) < w else c |
    | `squarewave_fourier_series` | n (2) integer >= 1, T_period (8) > 0 | 4/T_period * sum_{i=1}^{n-1} cos((2i-1) 2pi/T_period x) |
    | `s2nn` | alpha (4) > 0, beta (1) | sigmoid rule if x < 0 else beta / (x + 1) |
    | `q_pseudo_spike` | alpha (2), > 1 | (1 + 2 abs(x) / (alpha - 1))^-alpha |
    | `leaky_k_relu` | leak (0), k (1) | k if x >= 0 else leak |
    | `fake_numerical_gradient` | alpha (0.3), > 0 | min(1 / abs(x), alpha) (x = 0: alpha) |
    | `log_tailed_relu` | alpha (0) | alpha if x <= 0, 1 if x <= 1, else 1 / x |
    | `rect` | alpha (1), > 0 | alpha if abs(x) < 1/(2 alpha) else 0 |

    Example:

    ```mlir
    #flexsn.surrogate<atan>                      // alpha = 2
    #flexsn.surrogate<sigmoid, alpha = 5.0>
    #flexsn.surrogate<piecewise_leaky_relu, w = 0.5, c = 0.1>
    ```
  }];
  let parameters = (ins "::mlir::flexsn::SurrogateKind":$kind,
                        "::mlir::DenseF64ArrayAttr":$params);
  let builders = [
    AttrBuilder<(ins "::mlir::flexsn::SurrogateKind":$kind,
                     "::llvm::ArrayRef<double>":$params), [{
      return $_get($_ctxt, kind, ::mlir::DenseF64ArrayAttr::get($_ctxt, params));
    }]>
  ];
  let skipDefaultBuilders = 1;
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The surrogate with every parameter at its default.
    static SurrogateAttr getDefault(::mlir::MLIRContext *ctx,
                                    SurrogateKind kind);
    /// The value of the named parameter; asserts that it exists.
    double getParam(::llvm::StringRef name) const;
    /// g'(x), the surrogate derivative, evaluated in double precision.
    double derivative(double x) const;
  }];
}

#endif // FLEXSN_DIALECT_FLEXSN_IR_FLEXSNATTRS_TD
