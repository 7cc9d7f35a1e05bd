//! The KV cache: per layer, the keys and values of the positions so far, one row per cell
//! (`[n_embd_k_gqa, cells]` and `[n_embd_v_gqa, cells]`), in a backend buffer of its own. One
//! sequence. A global layer has `n_ctx` cells and position `p` in cell `p`; a sliding-window
//! layer only ever looks back `n_swa` positions, so it has `n_swa + n_batch` cells (at most
//! `n_ctx`) used as a ring, position `p` in cell `p % cells` (as llama.cpp's separate SWA cache
//! does): a step of up to `n_batch` tokens never overwrites a position one of its queries still
//! sees.

use ggml::{backend, Backend, Buffer, Context, Tensor, Type};

use crate::model::Hparams;
use crate::{Error, Result};

/// The keys and values of one sequence.
#[derive(Debug)]
pub struct KvCache {
    k: Vec<Tensor>,
    v: Vec<Tensor>,
    n_ctx: usize,
    swa_cells: usize,
    buffer: Buffer,
    _ctx: Context,
}

impl KvCache {
    /// A cache of `n_ctx` positions for a model with `hp`, evaluated `n_batch` tokens at a
    /// time at most, of element type `ty` (F16, F32 or BF16), in `backend`'s buffer type,
    /// zeroed.
    pub fn new(
        hp: &Hparams,
        n_ctx: usize,
        n_batch: usize,
        ty: Type,
        backend: &Backend,
    ) -> Result<KvCache> {
        if !matches!(ty, Type::F16 | Type::F32 | Type::BF16) {
            return Err(Error::InvalidArgument(format!(
                "kv_type = {}; the cache holds F16, BF16 or F32",
                ty.name()
            )));
        }
        if n_ctx == 0 {
            return Err(Error::InvalidArgument(
                "n_ctx = 0; it must be positive".into(),
            ));
        }
        let swa_cells = if hp.n_swa > 0 {
            (hp.n_swa + n_batch).min(n_ctx)
        } else {
            0
        };
        let ctx = Context::for_metadata(2 * hp.n_layer, 0)?;
        let mut k = Vec::with_capacity(hp.n_layer);
        let mut v = Vec::with_capacity(hp.n_layer);
        for il in 0..hp.n_layer {
            let cells = if hp.is_swa(il) { swa_cells } else { n_ctx } as i64;
            let kt = ctx.new_tensor_2d(ty, hp.n_embd_k_gqa() as i64, cells)?;
            kt.set_name(&format!("cache_k_l{il}"));
            let vt = ctx.new_tensor_2d(ty, hp.n_embd_v_gqa() as i64, cells)?;
            vt.set_name(&format!("cache_v_l{il}"));
            k.push(kt);
            v.push(vt);
        }
        let buffer = backend::alloc_ctx_tensors(&ctx, backend)?;
        buffer.clear(0)?;
        Ok(KvCache {
            k,
            v,
            n_ctx,
            swa_cells,
            buffer,
            _ctx: ctx,
        })
    }

    /// Positions the cache holds.
    pub fn n_ctx(&self) -> usize {
        self.n_ctx
    }

    /// Cells of each sliding-window layer (0 when the model has none).
    pub fn swa_cells(&self) -> usize {
        self.swa_cells
    }

    /// Bytes of the cache's buffer.
    pub fn size_bytes(&self) -> usize {
        self.buffer.get_size()
    }

    /// The keys of layer `il`.
    pub(crate) fn k(&self, il: usize) -> &Tensor {
        &self.k[il]
    }

    /// The values of layer `il`.
    pub(crate) fn v(&self, il: usize) -> &Tensor {
        &self.v[il]
    }
}
