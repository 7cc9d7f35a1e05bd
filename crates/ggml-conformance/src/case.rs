//! The case model: a named op invocation with its input specifications, the graph builder, an
//! f64 reference and the error metric — what GGML's `test-backend-ops` calls a test case.

use std::fmt::{Display, Write};
use std::sync::Arc;

use ggml::{Context, Tensor, Type};

use crate::host::{Host, Shape};
use crate::rng::Rng;

/// GGML's default NMSE threshold.
pub const NMSE_DEFAULT: f64 = 1e-7;
/// GGML's threshold for accumulation-heavy ops: MUL_MAT, MUL_MAT_ID, OUT_PROD, convolutions,
/// FLASH_ATTN_EXT.
pub const NMSE_MATMUL: f64 = 5e-4;
/// GGML's threshold for SOFT_MAX (and LIGHTNING_INDEXER).
pub const NMSE_SOFT_MAX: f64 = 1e-6;

/// How a result is judged against its reference. Before either metric, a NaN on either side
/// fails, and infinities (or ±`f32::MAX`, as GGML counts them) must sit at the same positions
/// with the same sign; those positions are then left out.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Metric {
    /// Normalised mean squared error `Σ(got − want)² / Σ want²` at most the threshold.
    Nmse(f64),
    /// Every value equal (index-producing ops, copies between equal types).
    Exact,
    /// Each row (along dimension 0) holds the same set of values, in any order: TOP_K, whose
    /// result GGML does not order.
    IndexSet,
    /// The computation must fail with an error whose message contains this text, leaving the
    /// guards intact: an index operand holding a value outside its range (GGML asserts).
    ComputeFails(&'static str),
}

impl Metric {
    /// The threshold as a number (0 for the metrics without one).
    pub fn threshold(self) -> f64 {
        match self {
            Metric::Nmse(t) => t,
            Metric::Exact | Metric::IndexSet | Metric::ComputeFails(_) => 0.0,
        }
    }
}

/// How an input tensor is laid out in memory. Its logical shape is always the one asked for;
/// the layouts other than `Contiguous` are views of a larger or differently shaped tensor, which
/// is what gets allocated and initialised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// A plain contiguous tensor.
    Contiguous,
    /// `ctx.permute(base, a0, a1, a2, a3)` of a contiguous tensor (source dimension `i` goes to
    /// position `axes[i]`, as in GGML).
    Permuted([usize; 4]),
    /// `ctx.transpose(base)` of a contiguous tensor.
    Transposed,
    /// A 4-D view into a larger tensor: rows longer by 3 elements (one block for quantized
    /// types), one extra row per plane, at a non-zero offset — GGML's `v=1` inputs.
    Padded,
}

/// A reusable value generator for [`Init::Custom`]: `(rng, index in the allocated tensor)`.
pub type InitFn = Arc<dyn Fn(&mut Rng, Shape) -> f64 + Send + Sync>;

/// How an input's values are made (in the memory order of the allocated tensor).
#[derive(Clone)]
pub enum Init {
    /// Uniform in `[lo, hi)`.
    Uniform(f64, f64),
    /// Uniform integers in `lo..=hi` (indices, integer tensors).
    Ints(i64, i64),
    /// Each row (along dimension 0 of the allocated tensor) holds `ne0` distinct values,
    /// evenly spaced over `[lo, hi)` and shuffled: no ties, even after rounding to the type
    /// when the spacing is larger than its precision (for ARGMAX, ARGSORT, TOP_K, and distinct
    /// indices when the spacing is at least 1).
    Distinct(f64, f64),
    /// Any generator.
    Custom(InitFn),
}

impl std::fmt::Debug for Init {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Init::Uniform(lo, hi) => write!(f, "Uniform({lo}, {hi})"),
            Init::Ints(lo, hi) => write!(f, "Ints({lo}, {hi})"),
            Init::Distinct(lo, hi) => write!(f, "Distinct({lo}, {hi})"),
            Init::Custom(_) => f.write_str("Custom"),
        }
    }
}

/// One input of a case: type, logical shape, layout and initialisation. Quantized inputs are
/// made by quantizing f32 values with `ggml::quantize_chunk` (with an all-ones importance matrix
/// where the type needs one); the reference then reads the dequantized values.
#[derive(Clone, Debug)]
pub struct Input {
    /// Element type.
    pub ty: Type,
    /// Logical shape (1 to 5 dimensions).
    pub ne: Vec<i64>,
    /// Memory layout.
    pub layout: Layout,
    /// Initialisation.
    pub init: Init,
}

impl Input {
    /// A contiguous input of `ty` and shape `ne`, uniform in [-1, 1) (GGML's default).
    pub fn new(ty: Type, ne: &[i64]) -> Input {
        Input {
            ty,
            ne: ne.to_vec(),
            layout: Layout::Contiguous,
            init: Init::Uniform(-1.0, 1.0),
        }
    }

    /// The same input laid out as `layout`.
    pub fn layout(mut self, layout: Layout) -> Input {
        self.layout = layout;
        self
    }

    /// The same input initialised by `init`.
    pub fn init(mut self, init: Init) -> Input {
        self.init = init;
        self
    }

    /// The same input, uniform in `[lo, hi)`.
    pub fn uniform(self, lo: f64, hi: f64) -> Input {
        self.init(Init::Uniform(lo, hi))
    }

    /// [`Layout::Padded`] when `view` is true (GGML's `v` parameter), else unchanged.
    pub fn padded_if(self, view: bool) -> Input {
        if view {
            self.layout(Layout::Padded)
        } else {
            self
        }
    }
}

/// Builds a case's graph from its inputs (in [`Case::inputs`] order); returns the outputs.
pub type BuildFn = dyn Fn(&Context, &[Tensor]) -> ggml::Result<Vec<Tensor>> + Send + Sync;
/// Computes a case's expected outputs in f64 from the inputs' logical values.
pub type ReferenceFn = dyn Fn(&[Host]) -> Vec<Host> + Send + Sync;

/// A conformance case: `OP(var=value,…)`, its inputs, graph, reference and metric.
pub struct Case {
    name: String,
    op: String,
    /// The inputs, in the order the builder and the reference receive them.
    pub inputs: Vec<Input>,
    build: Box<BuildFn>,
    reference: Box<ReferenceFn>,
    /// How the outputs are judged.
    pub metric: Metric,
}

impl Case {
    /// A case of op `op` (GGML's `ggml_op_desc`: `ADD`, `MUL_MAT`, a unary op's own name such
    /// as `SILU`) with parameters `vars`, one output made by `build`, checked against
    /// `reference` with GGML's default metric (NMSE ≤ 1e-7).
    pub fn new(
        op: &str,
        vars: Vars,
        inputs: Vec<Input>,
        build: impl Fn(&Context, &[Tensor]) -> ggml::Result<Tensor> + Send + Sync + 'static,
        reference: impl Fn(&[Host]) -> Host + Send + Sync + 'static,
    ) -> Case {
        Case::new_multi(
            op,
            vars,
            inputs,
            move |ctx, x| build(ctx, x).map(|t| vec![t]),
            move |x| vec![reference(x)],
        )
    }

    /// As [`Case::new`] for a graph with several outputs (in the order `reference` returns them).
    pub fn new_multi(
        op: &str,
        vars: Vars,
        inputs: Vec<Input>,
        build: impl Fn(&Context, &[Tensor]) -> ggml::Result<Vec<Tensor>> + Send + Sync + 'static,
        reference: impl Fn(&[Host]) -> Vec<Host> + Send + Sync + 'static,
    ) -> Case {
        Case {
            name: format!("{op}({})", vars.0),
            op: op.to_string(),
            inputs,
            build: Box::new(build),
            reference: Box::new(reference),
            metric: Metric::Nmse(NMSE_DEFAULT),
        }
    }

    /// A case whose computation must fail with an error mentioning `needle`
    /// ([`Metric::ComputeFails`]): an index operand with a value outside its range. It has no
    /// reference.
    pub fn fails(
        op: &str,
        vars: Vars,
        inputs: Vec<Input>,
        build: impl Fn(&Context, &[Tensor]) -> ggml::Result<Tensor> + Send + Sync + 'static,
        needle: &'static str,
    ) -> Case {
        Case::new(op, vars, inputs, build, |_| {
            panic!("a case that must fail has no reference")
        })
        .metric(Metric::ComputeFails(needle))
    }

    /// The same case judged by `metric`.
    pub fn metric(mut self, metric: Metric) -> Case {
        self.metric = metric;
        self
    }

    /// The full name, `OP(var=value,…)`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The op name (`ADD`, `SILU`, …).
    pub fn op(&self) -> &str {
        &self.op
    }

    /// Runs the builder. `Err` with the builder's error, or with its panic message if it
    /// panicked (a broken case fails alone instead of ending the run).
    pub fn build(&self, ctx: &Context, inputs: &[Tensor]) -> Result<Vec<Tensor>, String> {
        match catch(|| (self.build)(ctx, inputs))? {
            Ok(t) => Ok(t),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Runs the reference; `Err` with its panic message if it panicked.
    pub fn reference(&self, inputs: &[Host]) -> Result<Vec<Host>, String> {
        catch(|| (self.reference)(inputs))
    }
}

impl std::fmt::Debug for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Case")
            .field("name", &self.name)
            .field("inputs", &self.inputs)
            .field("metric", &self.metric)
            .finish()
    }
}

/// Runs `f`, turning a panic into `Err` with its message.
fn catch<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    // The closures only read their arguments; nothing is left half-updated by a panic.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|p| {
        let msg = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".into());
        format!("panicked: {msg}")
    })
}

/// A case's parameter string as GGML prints it: `type=f32,ne=[10,5,4,3],v=0`.
#[derive(Clone, Debug, Default)]
pub struct Vars(String);

impl Vars {
    /// No parameters yet.
    pub fn new() -> Vars {
        Vars::default()
    }

    fn key(mut self, k: &str) -> Vars {
        if !self.0.is_empty() {
            self.0.push(',');
        }
        self.0.push_str(k);
        self.0.push('=');
        self
    }

    /// `k=value` for anything printable (numbers, booleans as GGML prints them: use `u8`).
    pub fn val(self, k: &str, v: impl Display) -> Vars {
        let mut s = self.key(k);
        let _ = write!(s.0, "{v}");
        s
    }

    /// `k=x` for a float, spelled as GGML's `std::to_string` spells it (six decimals:
    /// `0.100000`, `0.000001`).
    pub fn float(self, k: &str, x: f32) -> Vars {
        self.val(k, format_args!("{x:.6}"))
    }

    /// `k=type` with GGML's type name (`f32`, `q4_K`).
    pub fn ty(self, k: &str, ty: Type) -> Vars {
        self.val(k, ty.name())
    }

    /// `k=[a,b,c,d]`.
    pub fn list<T: Display>(self, k: &str, items: &[T]) -> Vars {
        let mut s = self.key(k);
        s.0.push('[');
        for (i, x) in items.iter().enumerate() {
            if i > 0 {
                s.0.push(',');
            }
            let _ = write!(s.0, "{x}");
        }
        s.0.push(']');
        s
    }

    /// `k=0` or `k=1` (GGML prints its bool parameters as integers).
    pub fn flag(self, k: &str, b: bool) -> Vars {
        self.val(k, u8::from(b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_formatted_as_ggml() {
        let v = Vars::new()
            .ty("type", Type::Q4_K)
            .list("ne", &[10, 5, 4, 3])
            .flag("v", true)
            .float("eps", 1e-6);
        let c = Case::new(
            "NORM",
            v,
            vec![Input::new(Type::F32, &[4])],
            |ctx, x| ctx.norm(&x[0], 0.0),
            |x| x[0].clone(),
        );
        assert_eq!(c.name(), "NORM(type=q4_K,ne=[10,5,4,3],v=1,eps=0.000001)");
        assert_eq!(c.op(), "NORM");
        assert_eq!(c.metric, Metric::Nmse(NMSE_DEFAULT));
    }
}
