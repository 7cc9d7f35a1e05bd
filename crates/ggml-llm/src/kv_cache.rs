//! The KV cache: per layer, the keys and values of every position so far, one row per
//! position (`[n_embd_k_gqa, n_ctx]` and `[n_embd_v_gqa, n_ctx]`), in a backend buffer of its
//! own. One sequence: the row of position `p` is row `p`.

use ggml::{backend, Backend, Buffer, Context, Tensor, Type};

use crate::model::Hparams;
use crate::{Error, Result};

/// The keys and values of one sequence.
#[derive(Debug)]
pub struct KvCache {
    k: Vec<Tensor>,
    v: Vec<Tensor>,
    n_ctx: usize,
    buffer: Buffer,
    _ctx: Context,
}

impl KvCache {
    /// A cache of `n_ctx` positions for every layer of a model with `hp`, of element type `ty`
    /// (F16, F32 or BF16), in `backend`'s buffer type, zeroed.
    pub fn new(hp: &Hparams, n_ctx: usize, ty: Type, backend: &Backend) -> Result<KvCache> {
        if !matches!(ty, Type::F16 | Type::F32 | Type::BF16) {
            return Err(Error::InvalidArgument(format!(
                "kv_type = {}; the cache holds F16, BF16 or F32",
                ty.name()
            )));
        }
        if n_ctx == 0 {
            return Err(Error::InvalidArgument("n_ctx = 0; it must be positive".into()));
        }
        let ctx = Context::for_metadata(2 * hp.n_layer, 0)?;
        let mut k = Vec::with_capacity(hp.n_layer);
        let mut v = Vec::with_capacity(hp.n_layer);
        for il in 0..hp.n_layer {
            let kt = ctx.new_tensor_2d(ty, hp.n_embd_k_gqa() as i64, n_ctx as i64)?;
            kt.set_name(&format!("cache_k_l{il}"));
            let vt = ctx.new_tensor_2d(ty, hp.n_embd_v_gqa() as i64, n_ctx as i64)?;
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
            buffer,
            _ctx: ctx,
        })
    }

    /// Positions the cache holds.
    pub fn n_ctx(&self) -> usize {
        self.n_ctx
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
