//! Operators: the [`Op`] enum with GGML's numbering, and the builders (methods on
//! [`crate::Context`]) that check operand shapes and create result tensors, one file per family.

mod binary;
mod matmul;
mod norm;
mod reduce;
mod rows;
mod softmax;
mod unary;
mod view;

pub use unary::UnaryOp;

use crate::context::NewTensor;
use crate::tensor::Tensor;

macro_rules! ops {
    ($($name:ident = $v:literal, $s:literal;)*) => {
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
        }
    };
}

ops! {
    None = 0, "NONE"; Dup = 1, "DUP"; Add = 2, "ADD"; AddId = 3, "ADD_ID"; Add1 = 4, "ADD1";
    Acc = 5, "ACC"; Sub = 6, "SUB"; Mul = 7, "MUL"; Div = 8, "DIV"; Sqr = 9, "SQR";
    Sqrt = 10, "SQRT"; Log = 11, "LOG"; Sin = 12, "SIN"; Cos = 13, "COS"; Sum = 14, "SUM";
    SumRows = 15, "SUM_ROWS"; Cumsum = 16, "CUMSUM"; Mean = 17, "MEAN"; Argmax = 18, "ARGMAX";
    CountEqual = 19, "COUNT_EQUAL"; Repeat = 20, "REPEAT"; RepeatBack = 21, "REPEAT_BACK";
    Concat = 22, "CONCAT"; SiluBack = 23, "SILU_BACK"; Norm = 24, "NORM"; RmsNorm = 25, "RMS_NORM";
    RmsNormBack = 26, "RMS_NORM_BACK"; GroupNorm = 27, "GROUP_NORM"; L2Norm = 28, "L2_NORM";
    MulMat = 29, "MUL_MAT"; MulMatId = 30, "MUL_MAT_ID"; OutProd = 31, "OUT_PROD";
    Scale = 32, "SCALE"; Set = 33, "SET"; Cpy = 34, "CPY"; Cont = 35, "CONT";
    Reshape = 36, "RESHAPE"; View = 37, "VIEW"; Permute = 38, "PERMUTE";
    Transpose = 39, "TRANSPOSE"; GetRows = 40, "GET_ROWS"; GetRowsBack = 41, "GET_ROWS_BACK";
    SetRows = 42, "SET_ROWS"; Diag = 43, "DIAG"; DiagMaskInf = 44, "DIAG_MASK_INF";
    DiagMaskZero = 45, "DIAG_MASK_ZERO"; SoftMax = 46, "SOFT_MAX"; SoftMaxBack = 47, "SOFT_MAX_BACK";
    Rope = 48, "ROPE"; RopeBack = 49, "ROPE_BACK"; Clamp = 50, "CLAMP";
    ConvTranspose1d = 51, "CONV_TRANSPOSE_1D"; Im2col = 52, "IM2COL"; Im2colBack = 53, "IM2COL_BACK";
    Im2col3d = 54, "IM2COL_3D"; Col2im1d = 55, "COL2IM_1D"; Conv2d = 56, "CONV_2D";
    Conv3d = 57, "CONV_3D"; Conv2dDw = 58, "CONV_2D_DW"; ConvTranspose2d = 59, "CONV_TRANSPOSE_2D";
    Pool1d = 60, "POOL_1D"; Pool2d = 61, "POOL_2D"; Pool2dBack = 62, "POOL_2D_BACK";
    Upscale = 63, "UPSCALE"; Pad = 64, "PAD"; PadReflect1d = 65, "PAD_REFLECT_1D"; Roll = 66, "ROLL";
    Arange = 67, "ARANGE"; TimestepEmbedding = 68, "TIMESTEP_EMBEDDING"; Argsort = 69, "ARGSORT";
    TopK = 70, "TOP_K"; LeakyRelu = 71, "LEAKY_RELU"; Tri = 72, "TRI"; Fill = 73, "FILL";
    FlashAttnExt = 74, "FLASH_ATTN_EXT"; FlashAttnBack = 75, "FLASH_ATTN_BACK";
    SsmConv = 76, "SSM_CONV"; SsmScan = 77, "SSM_SCAN"; WinPart = 78, "WIN_PART";
    WinUnpart = 79, "WIN_UNPART"; GetRelPos = 80, "GET_REL_POS"; AddRelPos = 81, "ADD_REL_POS";
    RwkvWkv6 = 82, "RWKV_WKV6"; GatedLinearAttn = 83, "GATED_LINEAR_ATTN"; RwkvWkv7 = 84, "RWKV_WKV7";
    SolveTri = 85, "SOLVE_TRI"; GatedDeltaNet = 86, "GATED_DELTA_NET";
    LightningIndexer = 87, "LIGHTNING_INDEXER"; Dsv4HcComb = 88, "DSV4_HC_COMB";
    Dsv4HcPre = 89, "DSV4_HC_PRE"; Dsv4HcPost = 90, "DSV4_HC_POST"; Unary = 91, "UNARY";
    MapCustom1 = 92, "MAP_CUSTOM1"; MapCustom2 = 93, "MAP_CUSTOM2"; MapCustom3 = 94, "MAP_CUSTOM3";
    Custom = 95, "CUSTOM"; CrossEntropyLoss = 96, "CROSS_ENTROPY_LOSS";
    CrossEntropyLossBack = 97, "CROSS_ENTROPY_LOSS_BACK"; OptStepAdamw = 98, "OPT_STEP_ADAMW";
    OptStepSgd = 99, "OPT_STEP_SGD"; Glu = 100, "GLU";
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

impl crate::Context {
    /// A result of `a`'s type and shape computed by `op` from `srcs`. In place, the result is a
    /// view of `a` with `a`'s strides (GGML's `ggml_view_tensor`), so the kernel writes into
    /// `a`'s memory; otherwise it is a new contiguous tensor (`ggml_dup_tensor`).
    pub(crate) fn result_like(
        &self,
        a: &Tensor,
        op: Op,
        params: &[i32],
        srcs: Vec<Tensor>,
        inplace: bool,
    ) -> crate::Result<Tensor> {
        let ne = a.ne();
        let n = NewTensor::op(a.ty(), &ne, op, srcs).params(params);
        if inplace {
            self.new_tensor_impl(n.view_of(a, 0).strides(a.nb()))
        } else {
            self.new_tensor_impl(n)
        }
    }
}

/// Stores an f32 into an op-parameter slot (GGML memcpy's floats into `op_params`).
pub(crate) fn f32_param(x: f32) -> i32 {
    x.to_bits() as i32
}
