//! Running a decoder: a [`Session`] holds the KV cache, the backend and the graph allocator;
//! [`Session::eval`] processes tokens in chunks of `n_batch` per graph and returns logits,
//! [`Session::generate`] samples a continuation.
//!
//! Compute memory is reserved once, when the session is made, for the largest step
//! (`n_batch` tokens over the whole cache); every later graph is placed in that memory by the
//! graph allocator without growing it ([`SessionStats::compute_buffer_grows`] counts the
//! times it had to: once, for the first step that outputs the logits of every token). A graph is built once per step shape and run again while the shape stays
//! the same — during generation, a step of one token keeps its shape for 256 positions (the
//! cache is viewed in multiples of 256 cells) — with only its inputs rewritten
//! ([`SessionStats::graphs_reused`]).
//!
//! On the CPU a session computes on one backend. On any other device (a GPU) it computes
//! through the scheduler over that device and the CPU: the weights and the KV cache are in the
//! device's memory, except the token embeddings (their GET_ROWS runs on the CPU, as in
//! llama.cpp), and the CPU computes what the device does not support
//! ([`SessionStats::n_splits`] counts the runs of consecutive nodes on one backend).

use std::time::{Duration, Instant};

use ggml::{backend, Backend, DeviceType, Gallocr, Graph, Sched, Type};

use crate::arch::{self, Step, StepGraph};
use crate::kv_cache::KvCache;
use crate::model::Model;
use crate::sampling::Chain;
use crate::vocab::Token;
use crate::{Error, Result};

/// The cache is viewed in multiples of this many cells, so that one-token steps keep their
/// graph's shape for this many positions.
const KV_PAD: usize = 256;

/// How to run a session.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionOptions {
    /// Positions the KV cache holds (prompt and generated tokens together).
    pub n_ctx: usize,
    /// Threads of the CPU backend.
    pub n_threads: usize,
    /// Most tokens per graph when processing a prompt.
    pub n_batch: usize,
    /// Attention by FLASH_ATTN_EXT (llama.cpp's default on the CPU, and the default here: on
    /// Gemma 3 270M its greedy tokens are llama.cpp's) rather than MUL_MAT and SOFT_MAX. At
    /// present this library's FLASH_ATTN_EXT kernel makes a 512-token prompt about 5× slower
    /// than the two ops (it converts the F16 cache one element at a time); turn it off for
    /// speed.
    pub flash_attn: bool,
    /// Element type of the KV cache (F16 as in llama.cpp, BF16 or F32).
    pub kv_type: Type,
}

impl Default for SessionOptions {
    /// 4096 positions, every core, batches of 512, flash attention, an F16 cache.
    fn default() -> SessionOptions {
        SessionOptions {
            n_ctx: 4096,
            n_threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            n_batch: 512,
            flash_attn: true,
            kv_type: Type::F16,
        }
    }
}

/// Counters of a session's graph and memory use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionStats {
    /// Graphs built (one per new step shape).
    pub graphs_built: usize,
    /// Steps that ran a graph built before, with new inputs only.
    pub graphs_reused: usize,
    /// Bytes of compute buffers, as reserved when the session was made.
    pub compute_buffer_bytes: usize,
    /// Times a step needed more compute memory than was reserved (0 when the reservation
    /// covered every step).
    pub compute_buffer_grows: usize,
    /// Bytes of the KV cache.
    pub kv_cache_bytes: usize,
    /// Splits of the last graph: runs of consecutive nodes on one backend (1 on the CPU; on
    /// another device, each change between it and the CPU adds one).
    pub n_splits: usize,
}

/// What [`Session::generate`] did, with timings.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Generation {
    /// Prompt tokens processed.
    pub n_prompt: usize,
    /// Time spent on the prompt.
    pub prompt_time: Duration,
    /// Tokens generated (the end-of-generation token, if one came, not counted).
    pub n_generated: usize,
    /// Time spent generating (evaluating and sampling).
    pub gen_time: Duration,
}

impl Generation {
    /// Prompt tokens per second.
    pub fn prompt_tps(&self) -> f64 {
        self.n_prompt as f64 / self.prompt_time.as_secs_f64().max(1e-9)
    }

    /// Generated tokens per second.
    pub fn gen_tps(&self) -> f64 {
        self.n_generated as f64 / self.gen_time.as_secs_f64().max(1e-9)
    }
}

/// What [`Session::set_progress`] calls: `(tokens_done, tokens_total)`.
pub type ProgressFn = Box<dyn FnMut(usize, usize) + Send + Sync>;

/// A decoder with its KV cache: evaluates tokens in order, each at the next position.
/// `Send + Sync`.
pub struct Session {
    model: Model,
    options: SessionOptions,
    kv: KvCache,
    compute: Compute,
    graph: Option<StepGraph>,
    n_past: usize,
    stats: SessionStats,
    progress: Option<ProgressFn>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("model", &self.model)
            .field("options", &self.options)
            .field("n_past", &self.n_past)
            .field("stats", &self.stats)
            .field("progress", &self.progress.is_some())
            .finish_non_exhaustive()
    }
}

impl Session {
    pub(crate) fn new(model: Model, options: SessionOptions) -> Result<Session> {
        let hp = model.hparams();
        if hp.arch.is_encoder() {
            return Err(Error::InvalidArgument(format!(
                "model: {} is an encoder; use Model::embed",
                hp.arch.name()
            )));
        }
        for (name, v) in [
            ("n_ctx", options.n_ctx),
            ("n_threads", options.n_threads),
            ("n_batch", options.n_batch),
        ] {
            if v == 0 {
                return Err(Error::InvalidArgument(format!(
                    "{name} = 0; it must be positive"
                )));
            }
        }
        let compute = Compute::new(&model, options.n_threads, 2 * arch::max_nodes(hp))?;
        let kv = KvCache::new(
            hp,
            options.n_ctx,
            options.n_batch,
            options.kv_type,
            compute.backend(),
        )?;
        let mut s = Session {
            model,
            options,
            kv,
            compute,
            graph: None,
            n_past: 0,
            stats: SessionStats::default(),
            progress: None,
        };
        s.reserve()?;
        Ok(s)
    }

    /// Reserves compute memory for the largest steps that output the last token's logits:
    /// `n_batch` tokens (at most `n_ctx`) and one token, over the whole cache (the graphs
    /// differ in shape, so each is planned; the buffer takes the largest). A step that outputs
    /// every row (`eval(…, true)`) needs room for `n_batch × n_vocab` logits more — 512 MiB
    /// for Gemma 3 — and grows the buffer once when it first runs
    /// ([`SessionStats::compute_buffer_grows`]); generation never needs it.
    fn reserve(&mut self) -> Result<()> {
        let (n_ctx, n) = (
            self.options.n_ctx,
            self.options.n_batch.min(self.options.n_ctx),
        );
        for (n_tokens, n_out) in [(n, 1), (1, 1)] {
            let step = Step {
                n_tokens,
                n_kv: n_ctx,
                n_kv_swa: self.kv.swa_cells(),
                n_out,
            };
            let g = arch::build(&self.model, Some(&self.kv), step, self.options.flash_attn)?;
            self.compute.reserve(&g.graph)?;
        }
        self.stats.compute_buffer_bytes = self.compute.buffer_size()?;
        self.stats.kv_cache_bytes = self.kv.size_bytes();
        Ok(())
    }

    /// The model.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The options the session was made with.
    pub fn options(&self) -> &SessionOptions {
        &self.options
    }

    /// Positions evaluated so far (the next token goes at this position).
    pub fn n_past(&self) -> usize {
        self.n_past
    }

    /// The counters of graph and memory use.
    pub fn stats(&self) -> SessionStats {
        self.stats
    }

    /// Sets (or with `None` removes) the function told how far an evaluation of several
    /// tokens — a prompt — has got: after each chunk of `n_batch` tokens it is called with
    /// the tokens done so far and the tokens of the call ([`Session::eval`], the prompt of
    /// [`Session::generate`]). One-token steps do not call it.
    pub fn set_progress(&mut self, progress: Option<ProgressFn>) {
        self.progress = progress;
    }

    /// Forgets every position (the cache is overwritten from position 0 on).
    pub fn clear(&mut self) {
        self.n_past = 0;
    }

    /// Evaluates `tokens` at the next positions, `n_batch` per graph, and returns the logits:
    /// `tokens.len() × n_vocab` values (row `i` for token `i`) with `all_logits`, else the
    /// `n_vocab` logits of the last token. `Err` for no tokens, a token id outside the
    /// vocabulary, or more tokens than the context has room for (nothing is evaluated then).
    pub fn eval(&mut self, tokens: &[Token], all_logits: bool) -> Result<Vec<f32>> {
        let mut out = Vec::new();
        self.eval_into(tokens, all_logits, &mut out)?;
        Ok(out)
    }

    /// [`Session::eval`] into `out` (cleared first), so that a caller stepping token by token
    /// reuses one buffer instead of allocating `n_vocab` floats per step.
    fn eval_into(&mut self, tokens: &[Token], all_logits: bool, out: &mut Vec<f32>) -> Result<()> {
        if tokens.is_empty() {
            return Err(Error::InvalidArgument("tokens is empty".into()));
        }
        let n_vocab = self.model.n_vocab();
        if let Some((i, &t)) = tokens
            .iter()
            .enumerate()
            .find(|(_, &t)| t as usize >= n_vocab)
        {
            return Err(Error::InvalidArgument(format!(
                "tokens[{i}] = {t}; the vocabulary has {n_vocab} tokens"
            )));
        }
        let n_ctx = self.options.n_ctx;
        if self.n_past + tokens.len() > n_ctx {
            return Err(Error::InvalidArgument(format!(
                "{} tokens after {} evaluated ones exceed the context of n_ctx = {n_ctx} \
                 positions (the prompt is longer than the context)",
                tokens.len(),
                self.n_past
            )));
        }
        out.clear();
        out.reserve(if all_logits {
            tokens.len() * n_vocab
        } else {
            n_vocab
        });
        let chunks: Vec<&[Token]> = tokens.chunks(self.options.n_batch).collect();
        let mut done = 0;
        for (ci, chunk) in chunks.iter().enumerate() {
            let last = ci + 1 == chunks.len();
            let used = (self.n_past + chunk.len()).next_multiple_of(KV_PAD);
            let step = Step {
                n_tokens: chunk.len(),
                n_kv: used.min(n_ctx),
                n_kv_swa: used.min(self.kv.swa_cells()),
                n_out: if all_logits { chunk.len() } else { 1 },
            };
            self.prepare_graph(step)?;
            let g = self.graph.as_ref().expect("prepared");
            g.set_inputs(chunk, self.n_past, self.model.hparams())?;
            self.compute.compute(&g.graph)?;
            if let Some(dir) = arch::dump_dir() {
                arch::dump(&g.graph, dir)?;
            }
            if all_logits || last {
                append_f32(&g.out, out)?;
            }
            self.n_past += chunk.len();
            done += chunk.len();
            if let Some(report) = self.progress.as_mut().filter(|_| tokens.len() > 1) {
                report(done, tokens.len());
            }
        }
        Ok(())
    }

    /// Makes `self.graph` the graph for `step`: the last one when it has this shape, else a
    /// new one placed by the graph allocator.
    fn prepare_graph(&mut self, step: Step) -> Result<()> {
        if self.graph.as_ref().is_some_and(|g| g.step == step) {
            self.stats.graphs_reused += 1;
        } else {
            // Drop the old graph first: its tensors' memory goes back to the allocator.
            self.graph = None;
            let g = arch::build(&self.model, Some(&self.kv), step, self.options.flash_attn)?;
            self.compute.alloc(&g.graph)?;
            let size = self.compute.buffer_size()?;
            if size > self.stats.compute_buffer_bytes {
                self.stats.compute_buffer_grows += 1;
                self.stats.compute_buffer_bytes = size;
            }
            self.stats.n_splits = self.compute.n_splits();
            self.stats.graphs_built += 1;
            self.graph = Some(g);
        }
        Ok(())
    }

    /// Evaluates `prompt`, then samples up to `n_predict` tokens with `sampler`, calling
    /// `on_token` with each as it comes; stops early at an end-of-generation token or when
    /// `on_token` returns `false`. The prompt's tokens are given to the sampler's history
    /// first (for the repetition penalty), as llama.cpp does. `Err` when the prompt and
    /// `n_predict` do not fit in the context.
    pub fn generate(
        &mut self,
        prompt: &[Token],
        n_predict: usize,
        sampler: &mut Chain,
        mut on_token: impl FnMut(Token) -> Result<bool>,
    ) -> Result<Generation> {
        let n_ctx = self.options.n_ctx;
        if self.n_past + prompt.len() + n_predict > n_ctx {
            return Err(Error::InvalidArgument(format!(
                "the prompt ({} tokens) and n_predict = {n_predict} after {} evaluated ones \
                 exceed the context of n_ctx = {n_ctx} positions",
                prompt.len(),
                self.n_past
            )));
        }
        let mut g = Generation {
            n_prompt: prompt.len(),
            ..Generation::default()
        };
        let t0 = Instant::now();
        let mut logits = self.eval(prompt, false)?;
        g.prompt_time = t0.elapsed();
        for &t in prompt {
            sampler.accept(t);
        }
        let t1 = Instant::now();
        for i in 0..n_predict {
            let tok = sampler.sample(&logits)?;
            if self.model.vocab().is_eog(tok) || !on_token(tok)? {
                break;
            }
            g.n_generated += 1;
            if i + 1 < n_predict {
                self.eval_into(&[tok], false, &mut logits)?;
            }
        }
        g.gen_time = t1.elapsed();
        Ok(g)
    }
}

/// Appends the values of `t` (the logits) to `out`: an F32 tensor's bytes are read straight
/// into `out`'s new tail, with no buffer of their own; another type through `get_f32`.
fn append_f32(t: &ggml::Tensor, out: &mut Vec<f32>) -> Result<()> {
    if t.ty() != Type::F32 || !t.is_contiguous() {
        out.extend(t.get_f32()?);
        return Ok(());
    }
    let start = out.len();
    out.resize(start + t.nelements() as usize, 0.0);
    let tail = &mut out[start..];
    t.get_bytes(bytemuck::cast_slice_mut(tail), 0)?;
    if cfg!(target_endian = "big") {
        tail.iter_mut()
            .for_each(|v| *v = f32::from_bits(u32::from_le(v.to_bits())));
    }
    Ok(())
}

/// Where a model's graphs are computed: on the CPU alone (one backend, graphs placed by a
/// graph allocator), or — for any other device — through the scheduler over that device and
/// the CPU, which computes what the device refuses (the token embeddings' GET_ROWS, whose
/// weights stay in host memory, and any op the device does not support).
#[derive(Debug)]
pub(crate) enum Compute {
    /// The CPU alone.
    Cpu {
        /// The CPU stream.
        backend: Backend,
        /// Places every graph in one compute buffer.
        galloc: Gallocr,
    },
    /// The model's device, then the CPU, through the scheduler.
    Sched {
        /// The device's stream (the KV cache lives in its memory).
        device: Backend,
        /// The scheduler over `[device, CPU]`.
        sched: Sched,
    },
}

impl Compute {
    /// The compute of `model` with `n_threads` CPU threads, for graphs of at most
    /// `graph_size` nodes and leafs.
    pub(crate) fn new(model: &Model, n_threads: usize, graph_size: usize) -> Result<Compute> {
        let dev = model.device();
        if dev.dev_type() == DeviceType::Cpu {
            let backend = dev.init(None)?;
            backend.set_n_threads(n_threads)?;
            let galloc = Gallocr::new(&backend.get_default_buffer_type())?;
            return Ok(Compute::Cpu { backend, galloc });
        }
        let device = dev.init(None)?;
        let cpu = backend::cpu_init()?;
        cpu.set_n_threads(n_threads)?;
        let sched = backend::sched_new(&[device.clone(), cpu], graph_size, false)?;
        Ok(Compute::Sched { device, sched })
    }

    /// The stream of the model's device (where the KV cache goes).
    pub(crate) fn backend(&self) -> &Backend {
        match self {
            Compute::Cpu { backend, .. } => backend,
            Compute::Sched { device, .. } => device,
        }
    }

    /// Plans `graph` as one of the largest to come and reserves the compute memory it needs
    /// (buffers only grow).
    pub(crate) fn reserve(&self, graph: &Graph) -> Result<()> {
        match self {
            Compute::Cpu { galloc, .. } => galloc.reserve(graph)?,
            Compute::Sched { sched, .. } => sched.reserve(graph)?,
        }
        Ok(())
    }

    /// Places `graph` (a new one: the scheduler forgets the last graph's assignment first).
    /// Its inputs can be set after this call.
    pub(crate) fn alloc(&self, graph: &Graph) -> Result<()> {
        match self {
            Compute::Cpu { galloc, .. } => galloc.alloc_graph(graph)?,
            Compute::Sched { sched, .. } => {
                sched.reset();
                sched.alloc_graph(graph)?;
            }
        }
        Ok(())
    }

    /// Computes `graph`, the last one placed by [`Compute::alloc`], and waits for it.
    pub(crate) fn compute(&self, graph: &Graph) -> Result<()> {
        match self {
            Compute::Cpu { backend, .. } => backend.graph_compute(graph)?,
            Compute::Sched { sched, .. } => sched.graph_compute(graph)?,
        }
        Ok(())
    }

    /// Bytes of the compute buffers, every backend's together.
    pub(crate) fn buffer_size(&self) -> Result<usize> {
        Ok(match self {
            Compute::Cpu { galloc, .. } => galloc.get_buffer_size(0),
            Compute::Sched { sched, .. } => (0..sched.get_n_backends())
                .filter_map(|i| sched.get_backend(i))
                .map(|b| sched.get_buffer_size(&b))
                .sum::<ggml::Result<usize>>()?,
        })
    }

    /// Splits of the last graph placed: 1 on the CPU alone, else the scheduler's count (each
    /// change of backend along the graph is one more).
    pub(crate) fn n_splits(&self) -> usize {
        match self {
            Compute::Cpu { .. } => 1,
            Compute::Sched { sched, .. } => sched.get_n_splits(),
        }
    }
}
