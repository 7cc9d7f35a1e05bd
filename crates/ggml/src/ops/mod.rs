//! Operators: the [`Op`] enum with GGML's numbering, and the builders (methods on
//! [`crate::Context`]) that check operand shapes and create result tensors, one file per family.

mod arith;
mod binary;
mod matmul;
mod node;
mod norm;
mod reduce;
mod rows;
mod softmax;
pub mod spec;
mod unary;
mod view;

pub use arith::{
    ArangeParams, ClampParams, DiagMaskParams, FillParams, LeakyReluParams, PadParams,
    PadReflectParams, RollParams, TimestepParams, TriParams, TriType, WindowParams,
};
pub use matmul::{MulMatParams, Prec};
pub use node::NodeDesc;
pub use norm::NormParams;
pub use rows::ConcatParams;
pub use softmax::SoftMaxParams;
pub use spec::{read_params, write_params, Meta, NoParams, NodeMeta, Shape, Slot};
pub use unary::{ScaleParams, UnaryOp, UnaryParams};
pub use view::{PermuteParams, ViewParams};

use spec::OpSpec;

use crate::error::Result;
use crate::tensor::{MAX_DIMS, MAX_OP_PARAMS};

macro_rules! op_table {
    ($($name:ident = $v:literal, $s:literal, $spec:ty;)*) => {
        /// A tensor operation (`enum ggml_op`), with GGML's numeric values.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u32)]
        pub enum Op {
            $(
                #[doc = concat!("`GGML_OP_", $s, "`")]
                $name = $v,
            )*
        }

        impl Op {
            /// GGML's name for the op (`ggml_op_name`), e.g. `"MUL_MAT"`.
            pub fn name(self) -> &'static str {
                match self { $(Op::$name => $s,)* }
            }

            /// The op with GGML id `id`.
            pub fn from_u32(id: u32) -> Option<Op> {
                match id { $($v => Some(Op::$name),)* _ => None }
            }

            /// The op's operand slots in GGML's order, with their names and whether each must
            /// be given.
            pub fn slots(self) -> &'static [Slot] {
                match self { $(Op::$name => <$spec as OpSpec>::SLOTS,)* }
            }

            /// Whether the op has an `_inplace` form (its result may be a view of operand 0).
            pub fn has_inplace_form(self) -> bool {
                match self { $(Op::$name => spec::inplace_of::<$spec>(),)* }
            }

            /// What the op's shape rule gives for these operands (by slot) and raw parameters;
            /// `requested` is the result shape for ops whose builder takes it as an argument
            /// (REPEAT's target, say).
            pub fn shape(
                self,
                src: &[Option<Meta>],
                op_params: &[i32; MAX_OP_PARAMS / 4],
                requested: Option<[i64; MAX_DIMS]>,
            ) -> Result<Shape> {
                match self {
                    $(Op::$name => spec::shape_of::<$spec>(self, src, op_params, requested),)*
                }
            }
        }
    };
}

// Every op of `enum ggml_op` with the spec that describes it (its parameters, operand slots
// and shape rule). `Unbuilt` marks the ops this version has no builder for.
op_table! {
    None = 0, "NONE", spec::Leaf;
    Dup = 1, "DUP", view::Dup;
    Add = 2, "ADD", binary::Binary;
    AddId = 3, "ADD_ID", arith::AddId;
    Add1 = 4, "ADD1", binary::Add1;
    Acc = 5, "ACC", arith::Acc;
    Sub = 6, "SUB", binary::Binary;
    Mul = 7, "MUL", binary::Binary;
    Div = 8, "DIV", binary::Binary;
    Sqr = 9, "SQR", unary::Map;
    Sqrt = 10, "SQRT", unary::Map;
    Log = 11, "LOG", unary::Map;
    Sin = 12, "SIN", unary::Map;
    Cos = 13, "COS", unary::Map;
    Sum = 14, "SUM", reduce::Sum;
    SumRows = 15, "SUM_ROWS", reduce::SumRows;
    Cumsum = 16, "CUMSUM", spec::Unbuilt;
    Mean = 17, "MEAN", reduce::Mean;
    Argmax = 18, "ARGMAX", reduce::Argmax;
    CountEqual = 19, "COUNT_EQUAL", spec::Unbuilt;
    Repeat = 20, "REPEAT", rows::Repeat;
    RepeatBack = 21, "REPEAT_BACK", spec::Unbuilt;
    Concat = 22, "CONCAT", rows::Concat;
    SiluBack = 23, "SILU_BACK", spec::Unbuilt;
    Norm = 24, "NORM", norm::Norm;
    RmsNorm = 25, "RMS_NORM", norm::Norm;
    RmsNormBack = 26, "RMS_NORM_BACK", spec::Unbuilt;
    GroupNorm = 27, "GROUP_NORM", spec::Unbuilt;
    L2Norm = 28, "L2_NORM", spec::Unbuilt;
    MulMat = 29, "MUL_MAT", matmul::MulMat;
    MulMatId = 30, "MUL_MAT_ID", spec::Unbuilt;
    OutProd = 31, "OUT_PROD", spec::Unbuilt;
    Scale = 32, "SCALE", unary::Scale;
    Set = 33, "SET", arith::Set;
    Cpy = 34, "CPY", view::Cpy;
    Cont = 35, "CONT", view::Cont;
    Reshape = 36, "RESHAPE", view::Reshape;
    View = 37, "VIEW", view::ViewOp;
    Permute = 38, "PERMUTE", view::Permute;
    Transpose = 39, "TRANSPOSE", view::Transpose;
    GetRows = 40, "GET_ROWS", rows::GetRows;
    GetRowsBack = 41, "GET_ROWS_BACK", spec::Unbuilt;
    SetRows = 42, "SET_ROWS", spec::Unbuilt;
    Diag = 43, "DIAG", arith::Diag;
    DiagMaskInf = 44, "DIAG_MASK_INF", arith::DiagMask;
    DiagMaskZero = 45, "DIAG_MASK_ZERO", arith::DiagMask;
    SoftMax = 46, "SOFT_MAX", softmax::SoftMax;
    SoftMaxBack = 47, "SOFT_MAX_BACK", spec::Unbuilt;
    Rope = 48, "ROPE", spec::Unbuilt;
    RopeBack = 49, "ROPE_BACK", spec::Unbuilt;
    Clamp = 50, "CLAMP", arith::Clamp;
    ConvTranspose1d = 51, "CONV_TRANSPOSE_1D", spec::Unbuilt;
    Im2col = 52, "IM2COL", spec::Unbuilt;
    Im2colBack = 53, "IM2COL_BACK", spec::Unbuilt;
    Im2col3d = 54, "IM2COL_3D", spec::Unbuilt;
    Col2im1d = 55, "COL2IM_1D", spec::Unbuilt;
    Conv2d = 56, "CONV_2D", spec::Unbuilt;
    Conv3d = 57, "CONV_3D", spec::Unbuilt;
    Conv2dDw = 58, "CONV_2D_DW", spec::Unbuilt;
    ConvTranspose2d = 59, "CONV_TRANSPOSE_2D", spec::Unbuilt;
    Pool1d = 60, "POOL_1D", spec::Unbuilt;
    Pool2d = 61, "POOL_2D", spec::Unbuilt;
    Pool2dBack = 62, "POOL_2D_BACK", spec::Unbuilt;
    Upscale = 63, "UPSCALE", spec::Unbuilt;
    Pad = 64, "PAD", arith::Pad;
    PadReflect1d = 65, "PAD_REFLECT_1D", arith::PadReflect1d;
    Roll = 66, "ROLL", arith::Roll;
    Arange = 67, "ARANGE", arith::Arange;
    TimestepEmbedding = 68, "TIMESTEP_EMBEDDING", arith::TimestepEmbedding;
    Argsort = 69, "ARGSORT", spec::Unbuilt;
    TopK = 70, "TOP_K", spec::Unbuilt;
    LeakyRelu = 71, "LEAKY_RELU", arith::LeakyRelu;
    Tri = 72, "TRI", arith::Tri;
    Fill = 73, "FILL", arith::Fill;
    FlashAttnExt = 74, "FLASH_ATTN_EXT", spec::Unbuilt;
    FlashAttnBack = 75, "FLASH_ATTN_BACK", spec::Unbuilt;
    SsmConv = 76, "SSM_CONV", spec::Unbuilt;
    SsmScan = 77, "SSM_SCAN", spec::Unbuilt;
    WinPart = 78, "WIN_PART", spec::Unbuilt;
    WinUnpart = 79, "WIN_UNPART", spec::Unbuilt;
    GetRelPos = 80, "GET_REL_POS", spec::Unbuilt;
    AddRelPos = 81, "ADD_REL_POS", spec::Unbuilt;
    RwkvWkv6 = 82, "RWKV_WKV6", spec::Unbuilt;
    GatedLinearAttn = 83, "GATED_LINEAR_ATTN", spec::Unbuilt;
    RwkvWkv7 = 84, "RWKV_WKV7", spec::Unbuilt;
    SolveTri = 85, "SOLVE_TRI", spec::Unbuilt;
    GatedDeltaNet = 86, "GATED_DELTA_NET", spec::Unbuilt;
    LightningIndexer = 87, "LIGHTNING_INDEXER", spec::Unbuilt;
    Dsv4HcComb = 88, "DSV4_HC_COMB", spec::Unbuilt;
    Dsv4HcPre = 89, "DSV4_HC_PRE", spec::Unbuilt;
    Dsv4HcPost = 90, "DSV4_HC_POST", spec::Unbuilt;
    Unary = 91, "UNARY", unary::Unary;
    MapCustom1 = 92, "MAP_CUSTOM1", spec::Unbuilt;
    MapCustom2 = 93, "MAP_CUSTOM2", spec::Unbuilt;
    MapCustom3 = 94, "MAP_CUSTOM3", spec::Unbuilt;
    Custom = 95, "CUSTOM", spec::Unbuilt;
    CrossEntropyLoss = 96, "CROSS_ENTROPY_LOSS", arith::CrossEntropyLoss;
    CrossEntropyLossBack = 97, "CROSS_ENTROPY_LOSS_BACK", spec::Unbuilt;
    OptStepAdamw = 98, "OPT_STEP_ADAMW", spec::Unbuilt;
    OptStepSgd = 99, "OPT_STEP_SGD", spec::Unbuilt;
    Glu = 100, "GLU", spec::Unbuilt;
}

/// Number of ops (`GGML_OP_COUNT`).
pub const OP_COUNT: u32 = 101;

impl Op {
    /// Ops that compute nothing: the result is a view or a leaf (`ggml_op_is_empty`).
    pub fn is_empty(self) -> bool {
        matches!(
            self,
            Op::None | Op::Reshape | Op::Transpose | Op::View | Op::Permute
        )
    }

    /// Ops the graph allocator may compute in the memory of one of their operands
    /// (`ggml_op_can_inplace`).
    pub fn can_inplace(self) -> bool {
        matches!(
            self,
            Op::Fill
                | Op::Scale
                | Op::DiagMaskZero
                | Op::DiagMaskInf
                | Op::Add
                | Op::AddId
                | Op::Add1
                | Op::Sub
                | Op::Mul
                | Op::Div
                | Op::Sqr
                | Op::Sqrt
                | Op::Log
                | Op::Unary
                | Op::Rope
                | Op::RopeBack
                | Op::SiluBack
                | Op::RmsNorm
                | Op::RmsNormBack
                | Op::SoftMax
                | Op::SoftMaxBack
        )
    }
}

impl Op {
    /// Checks a node that no builder made (one received over the wire, say): its operands must
    /// fit the op's slots and shape rule, and its own type, shape and layout must be the ones
    /// the rule gives. `Err` names the op, the operand and the value that do not fit.
    pub fn validate(self, node: &NodeMeta<'_>) -> Result<()> {
        let shape = self.shape(node.src, node.op_params, Some(node.dst.ne))?;
        spec::check_node(self, node, shape, self.has_inplace_form())
    }
}
