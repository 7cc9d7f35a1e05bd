//! Operators: the [`Op`] enum with GGML's numbering, and the builders (methods on
//! [`crate::Context`]) that check operand shapes and create result tensors, one file per family.

mod arith;
mod attention;
mod backward;
mod binary;
mod conv;
pub mod custom;
mod dsv4;
mod glu;
mod matmul;
mod moe;
mod node;
mod norm;
mod out_prod;
mod pool;
mod reduce;
mod rope;
mod rows;
mod rwkv;
mod scan;
mod set_rows;
mod softmax;
mod sort;
pub mod spec;
mod ssm;
mod unary;
mod upscale;
mod view;
mod window;

pub use arith::{
    ArangeParams, ClampParams, DiagMaskParams, FillParams, LeakyReluParams, PadParams,
    PadReflectParams, RollParams, TimestepParams, TriParams, TriType, WindowParams,
};
pub use attention::FlashAttnExtParams;
pub use conv::{
    Col2im1dParams, Conv2dParams, Conv3dParams, ConvTranspose1dParams, ConvTranspose2dParams,
    Im2col3dParams, Im2colParams,
};
pub use custom::{CustomDst, CustomParams, CustomSrc, N_TASKS_MAX};
pub use dsv4::{HcCombParams, HcPreParams, HC_STREAMS};
pub use glu::{GluOp, GluParams};
pub use matmul::{MulMatParams, Prec};
pub use node::NodeDesc;
pub use norm::{GroupNormParams, NormParams};
pub use pool::{Pool1dParams, Pool2dParams, PoolOp};
pub use rope::{
    rope_yarn_corr_dims, RopeParams, MROPE_SECTIONS, ROPE_TYPE_IMROPE, ROPE_TYPE_MROPE,
    ROPE_TYPE_NEOX, ROPE_TYPE_NORMAL, ROPE_TYPE_VISION,
};
pub use rows::ConcatParams;
pub use rwkv::{GatedDeltaNetParams, GlaParams};
pub use softmax::SoftMaxParams;
pub use sort::{ArgsortParams, SortOrder};
pub use spec::{read_params, write_params, Meta, NoParams, NodeMeta, Shape, Slot};
pub use ssm::SsmScanParams;
pub use unary::{ScaleParams, UnaryOp, UnaryParams};
pub(crate) use unary::{GELU_COEF_A, GELU_QUICK_COEF, SQRT_2_OVER_PI};
pub use upscale::{ScaleMode, UpscaleParams, SCALE_FLAG_ALIGN_CORNERS, SCALE_FLAG_ANTIALIAS};
pub use view::{PermuteParams, ViewParams};
pub use window::{AddRelPosParams, WinPartParams, WinUnpartParams};

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
    Cumsum = 16, "CUMSUM", scan::Cumsum;
    Mean = 17, "MEAN", reduce::Mean;
    Argmax = 18, "ARGMAX", reduce::Argmax;
    CountEqual = 19, "COUNT_EQUAL", scan::CountEqual;
    Repeat = 20, "REPEAT", rows::Repeat;
    RepeatBack = 21, "REPEAT_BACK", arith::RepeatBack;
    Concat = 22, "CONCAT", rows::Concat;
    SiluBack = 23, "SILU_BACK", backward::SiluBack;
    Norm = 24, "NORM", norm::Norm;
    RmsNorm = 25, "RMS_NORM", norm::Norm;
    RmsNormBack = 26, "RMS_NORM_BACK", backward::RmsNormBack;
    GroupNorm = 27, "GROUP_NORM", norm::GroupNorm;
    L2Norm = 28, "L2_NORM", norm::Norm;
    MulMat = 29, "MUL_MAT", matmul::MulMat;
    MulMatId = 30, "MUL_MAT_ID", moe::MulMatId;
    OutProd = 31, "OUT_PROD", out_prod::OutProd;
    Scale = 32, "SCALE", unary::Scale;
    Set = 33, "SET", arith::Set;
    Cpy = 34, "CPY", view::Cpy;
    Cont = 35, "CONT", view::Cont;
    Reshape = 36, "RESHAPE", view::Reshape;
    View = 37, "VIEW", view::ViewOp;
    Permute = 38, "PERMUTE", view::Permute;
    Transpose = 39, "TRANSPOSE", view::Transpose;
    GetRows = 40, "GET_ROWS", rows::GetRows;
    GetRowsBack = 41, "GET_ROWS_BACK", backward::GetRowsBack;
    SetRows = 42, "SET_ROWS", set_rows::SetRows;
    Diag = 43, "DIAG", arith::Diag;
    DiagMaskInf = 44, "DIAG_MASK_INF", arith::DiagMask;
    DiagMaskZero = 45, "DIAG_MASK_ZERO", arith::DiagMask;
    SoftMax = 46, "SOFT_MAX", softmax::SoftMax;
    SoftMaxBack = 47, "SOFT_MAX_BACK", backward::SoftMaxBack;
    Rope = 48, "ROPE", rope::Rope;
    RopeBack = 49, "ROPE_BACK", rope::Rope;
    Clamp = 50, "CLAMP", arith::Clamp;
    ConvTranspose1d = 51, "CONV_TRANSPOSE_1D", conv::ConvTranspose1d;
    Im2col = 52, "IM2COL", conv::Im2col;
    Im2colBack = 53, "IM2COL_BACK", spec::Unbuilt;
    Im2col3d = 54, "IM2COL_3D", conv::Im2col3d;
    Col2im1d = 55, "COL2IM_1D", conv::Col2im1d;
    Conv2d = 56, "CONV_2D", conv::Conv2d;
    Conv3d = 57, "CONV_3D", conv::Conv3d;
    Conv2dDw = 58, "CONV_2D_DW", conv::Conv2dDw;
    ConvTranspose2d = 59, "CONV_TRANSPOSE_2D", conv::ConvTranspose2d;
    Pool1d = 60, "POOL_1D", pool::Pool1d;
    Pool2d = 61, "POOL_2D", pool::Pool2d;
    Pool2dBack = 62, "POOL_2D_BACK", spec::Unbuilt;
    Upscale = 63, "UPSCALE", upscale::Upscale;
    Pad = 64, "PAD", arith::Pad;
    PadReflect1d = 65, "PAD_REFLECT_1D", arith::PadReflect1d;
    Roll = 66, "ROLL", arith::Roll;
    Arange = 67, "ARANGE", arith::Arange;
    TimestepEmbedding = 68, "TIMESTEP_EMBEDDING", arith::TimestepEmbedding;
    Argsort = 69, "ARGSORT", sort::Argsort;
    TopK = 70, "TOP_K", sort::TopK;
    LeakyRelu = 71, "LEAKY_RELU", arith::LeakyRelu;
    Tri = 72, "TRI", arith::Tri;
    Fill = 73, "FILL", arith::Fill;
    FlashAttnExt = 74, "FLASH_ATTN_EXT", attention::FlashAttnExt;
    FlashAttnBack = 75, "FLASH_ATTN_BACK", spec::Unbuilt;
    SsmConv = 76, "SSM_CONV", ssm::SsmConv;
    SsmScan = 77, "SSM_SCAN", ssm::SsmScan;
    WinPart = 78, "WIN_PART", window::WinPart;
    WinUnpart = 79, "WIN_UNPART", window::WinUnpart;
    GetRelPos = 80, "GET_REL_POS", window::GetRelPos;
    AddRelPos = 81, "ADD_REL_POS", window::AddRelPos;
    RwkvWkv6 = 82, "RWKV_WKV6", rwkv::Wkv6;
    GatedLinearAttn = 83, "GATED_LINEAR_ATTN", rwkv::Gla;
    RwkvWkv7 = 84, "RWKV_WKV7", rwkv::Wkv7;
    SolveTri = 85, "SOLVE_TRI", scan::SolveTri;
    GatedDeltaNet = 86, "GATED_DELTA_NET", rwkv::GatedDeltaNet;
    LightningIndexer = 87, "LIGHTNING_INDEXER", dsv4::LightningIndexer;
    Dsv4HcComb = 88, "DSV4_HC_COMB", dsv4::HcComb;
    Dsv4HcPre = 89, "DSV4_HC_PRE", dsv4::HcPre;
    Dsv4HcPost = 90, "DSV4_HC_POST", dsv4::HcPost;
    Unary = 91, "UNARY", unary::Unary;
    MapCustom1 = 92, "MAP_CUSTOM1", custom::Custom;
    MapCustom2 = 93, "MAP_CUSTOM2", custom::Custom;
    MapCustom3 = 94, "MAP_CUSTOM3", custom::Custom;
    Custom = 95, "CUSTOM", custom::Custom;
    CrossEntropyLoss = 96, "CROSS_ENTROPY_LOSS", arith::CrossEntropyLoss;
    CrossEntropyLossBack = 97, "CROSS_ENTROPY_LOSS_BACK", backward::CrossEntropyLossBack;
    OptStepAdamw = 98, "OPT_STEP_ADAMW", backward::OptStepAdamw;
    OptStepSgd = 99, "OPT_STEP_SGD", backward::OptStepSgd;
    Glu = 100, "GLU", glu::Glu;
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
