//! Sentence embeddings from an encoder ([`Model::embed`]): one graph over the whole text,
//! then pooling and optional L2 normalisation of the hidden states, as llama.cpp's
//! `llama-embedding` does.

use crate::arch::{self, Step};
use crate::model::{Model, Pooling};
use crate::session::Compute;
use crate::vocab::Token;
use crate::{Error, Result};

impl Model {
    /// The embeddings of `tokens` (one text, special tokens included as tokenized): one vector
    /// of `n_embd` values for `Mean`, `Cls` and `Last` pooling, one per token for `None`; with
    /// `normalize`, each scaled to unit Euclidean length. Uses every core. `Err` for a model
    /// that is not an encoder, no tokens, a token outside the vocabulary, or more tokens than
    /// the model has positions for.
    pub fn embed(
        &self,
        tokens: &[Token],
        pooling: Pooling,
        normalize: bool,
    ) -> Result<Vec<Vec<f32>>> {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        self.embed_with_threads(tokens, pooling, normalize, n)
    }

    /// [`Model::embed`] on `n_threads` threads.
    pub fn embed_with_threads(
        &self,
        tokens: &[Token],
        pooling: Pooling,
        normalize: bool,
        n_threads: usize,
    ) -> Result<Vec<Vec<f32>>> {
        let hp = self.hparams();
        if !hp.arch.is_encoder() {
            return Err(Error::InvalidArgument(format!(
                "model: {} is not an encoder (embed runs bert models)",
                hp.arch.name()
            )));
        }
        if tokens.is_empty() {
            return Err(Error::InvalidArgument("tokens is empty".into()));
        }
        if n_threads == 0 {
            return Err(Error::InvalidArgument(
                "n_threads = 0; it must be positive".into(),
            ));
        }
        if let Some((i, &t)) = tokens
            .iter()
            .enumerate()
            .find(|(_, &t)| t as usize >= self.n_vocab())
        {
            return Err(Error::InvalidArgument(format!(
                "tokens[{i}] = {t}; the vocabulary has {} tokens",
                self.n_vocab()
            )));
        }
        if tokens.len() > hp.n_ctx_train {
            return Err(Error::InvalidArgument(format!(
                "{} tokens exceed the model's context of {} positions (the text is longer than \
                 the context)",
                tokens.len(),
                hp.n_ctx_train
            )));
        }
        let compute = Compute::new(self, n_threads, 2 * arch::max_nodes(hp))?;
        let step = Step {
            n_tokens: tokens.len(),
            n_kv: 0,
            n_kv_swa: 0,
            n_out: tokens.len(),
        };
        let g = arch::build(self, None, step, false)?;
        compute.alloc(&g.graph)?;
        g.set_inputs(tokens, 0, hp)?;
        compute.compute(&g.graph)?;
        let states = g.out.get_f32()?;
        let rows: Vec<&[f32]> = states.chunks(hp.n_embd).collect();
        let mut out: Vec<Vec<f32>> = match pooling {
            Pooling::None => rows.iter().map(|r| r.to_vec()).collect(),
            Pooling::Cls => vec![rows[0].to_vec()],
            Pooling::Last => vec![rows[rows.len() - 1].to_vec()],
            Pooling::Mean => {
                let mut sum = vec![0f64; hp.n_embd];
                for r in &rows {
                    for (s, &x) in sum.iter_mut().zip(r.iter()) {
                        *s += f64::from(x);
                    }
                }
                let n = rows.len() as f64;
                vec![sum.iter().map(|s| (s / n) as f32).collect()]
            }
        };
        if normalize {
            for v in &mut out {
                let norm = v
                    .iter()
                    .map(|&x| f64::from(x) * f64::from(x))
                    .sum::<f64>()
                    .sqrt();
                let k = if norm > 0.0 { 1.0 / norm } else { 0.0 };
                v.iter_mut().for_each(|x| *x = (f64::from(*x) * k) as f32);
            }
        }
        Ok(out)
    }
}
