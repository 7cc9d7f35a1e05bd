//! A GGUF model loaded for inference: its hyper-parameters ([`Hparams`]), vocabulary
//! ([`Vocab`]) and weights, bound to the memory-mapped file without a copy on the CPU. On
//! another device the weights are copied into its buffers, except the input layer's (token,
//! position and token-type embeddings: only a few rows are read per step, by a GET_ROWS the CPU
//! computes, as llama.cpp keeps them on the CPU) and any tensor larger than the device's
//! largest buffer, which stay mapped on the CPU; a tied output projection gets a copy of the
//! token embeddings on the device when they fit there.

mod hparams;
mod weights;

use std::path::Path;
use std::sync::Arc;

use ggml::gguf::{GgufFile, TensorInfo};
use ggml::{backend, Buffer, BufferUsage, Context, Device, DeviceType, Tensor};

pub use hparams::{Arch, Hparams, Pooling, RopeScaling};
pub(crate) use weights::{LayerWeights, Weights};

use crate::session::{Session, SessionOptions};
use crate::{Error, Result, Vocab};

/// How to load a model.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// The device to run on, by name (`ggml info` lists them; case-insensitive); `None` is
    /// the CPU.
    pub device: Option<String>,
    /// Put the weights only MUL_MAT reads (every 2-D or 3-D weight but the input layer's
    /// embeddings, which GET_ROWS reads) in the CPU's repack buffer type
    /// ([`backend::cpu_repack_buffer_type`]) when the model runs on the CPU and their type has
    /// a repacked layout there; their mapped pages are then released. Off by default, unlike
    /// llama.cpp (whose default is on): the layout (Q4_0, Q5_0 and IQ4_NL levels unpacked to
    /// bytes) takes 1.5–1.9× the bytes of those weights (Gemma 3 270M: 360 MB resident
    /// against 326 MB) and was not measured faster; without it every weight stays in the
    /// file's mapped bytes.
    pub repack: bool,
}

struct Inner {
    hparams: Hparams,
    vocab: Vocab,
    weights: Weights,
    placed: Placed,
    device: Device,
    n_params: u64,
    n_bytes: u64,
    description: String,
}

/// A loaded model. Cheap to clone (the weights are shared); `Send + Sync`.
#[derive(Clone)]
pub struct Model {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model")
            .field("arch", &self.inner.hparams.arch)
            .field("n_params", &self.inner.n_params)
            .field("mapped", &self.inner.placed.mapped)
            .field("device_bytes", &self.inner.placed.device_bytes)
            .finish()
    }
}

impl Model {
    /// Loads the model in the GGUF file at `path`: memory-mapped, its weights bound to the
    /// mapping without a copy when the device computes on host memory (the CPU). `Err` when
    /// the file is not a GGUF model, names an architecture this crate does not run, or lacks a
    /// key or tensor the architecture needs.
    pub fn load(path: impl AsRef<Path>, options: &LoadOptions) -> Result<Model> {
        Model::load_with_progress(path, options, |_, _| {})
    }

    /// [`Model::load`], calling `progress(bytes_done, bytes_total)` as the weights are bound:
    /// once with every byte when they are the mapped file, else after each tensor copied to
    /// the device (for a progress report on a long load).
    pub fn load_with_progress(
        path: impl AsRef<Path>,
        options: &LoadOptions,
        mut progress: impl FnMut(usize, usize),
    ) -> Result<Model> {
        let path = path.as_ref();
        let file = GgufFile::open(path).map_err(|e| {
            Error::Model(format!("{}: not a GGUF model file ({e})", path.display()))
        })?;
        Model::bind(&file, options, &mut progress)
    }

    /// [`Model::load`] for a file already opened (or read from memory, in which case the
    /// weights are copied into the device's buffers). The model keeps what it needs of
    /// `file` (the mapping its weights point into); the rest — the metadata, with the
    /// vocabulary's strings — is freed when `file` is dropped.
    pub fn from_file(file: GgufFile, options: &LoadOptions) -> Result<Model> {
        Model::bind(&file, options, &mut |_, _| {})
    }

    fn bind(
        file: &GgufFile,
        options: &LoadOptions,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Model> {
        let hparams = Hparams::from_gguf(file)?;
        let vocab = Vocab::from_gguf(file)?;
        let device = match &options.device {
            None => backend::dev_by_type(ggml::DeviceType::Cpu)
                .ok_or_else(|| Error::InvalidArgument("no CPU device is registered".into()))?,
            Some(name) => backend::dev_by_name(name).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "device = {name:?}: no such device (`ggml info` lists them)"
                ))
            })?,
        };
        let repack = options.repack;
        let placed = Placed::new(file, &device, !hparams.arch.is_encoder(), repack, progress)?;
        let weights = Weights::bind(&placed.ctx, &hparams, vocab.n_tokens())?;
        let infos = file.tensors();
        let n_params = infos.iter().map(|t| t.n_elements() as u64).sum();
        let n_bytes = infos.iter().map(|t| t.size() as u64).sum();
        let size = file
            .get("general.size_label")
            .and_then(|v| v.as_string())
            .map_or_else(|| "?B".to_string(), |s| s.to_string_lossy().into_owned());
        let description = format!("{} {size} {}", hparams.arch.name(), file_type_name(file));
        Ok(Model {
            inner: Arc::new(Inner {
                hparams,
                vocab,
                weights,
                placed,
                device,
                n_params,
                n_bytes,
                description,
            }),
        })
    }

    /// The hyper-parameters.
    pub fn hparams(&self) -> &Hparams {
        &self.inner.hparams
    }

    /// The vocabulary and its tokenizer.
    pub fn vocab(&self) -> &Vocab {
        &self.inner.vocab
    }

    /// Number of tokens of the vocabulary (the width of a row of logits).
    pub fn n_vocab(&self) -> usize {
        self.inner.vocab.n_tokens()
    }

    /// The device the model runs on (with the CPU, through the scheduler, when it is not the
    /// CPU).
    pub fn device(&self) -> &Device {
        &self.inner.device
    }

    /// Whether the weights are the file's mapped bytes (no copy was made), but for those
    /// repacked for the CPU ([`Model::repacked_bytes`]).
    pub fn is_mapped(&self) -> bool {
        self.inner.placed.mapped
    }

    /// Bytes of the CPU's repack buffer holding the weights repacked there (0 with
    /// [`LoadOptions::repack`] off, on other devices, or when no weight's type has a layout).
    pub fn repacked_bytes(&self) -> usize {
        self.inner.placed.repacked_bytes
    }

    /// Bytes of weights copied into the device's memory (0 on the CPU, where they are mapped).
    pub fn device_bytes(&self) -> usize {
        self.inner.placed.device_bytes
    }

    /// Number of weights (elements of all tensors).
    pub fn n_params(&self) -> u64 {
        self.inner.n_params
    }

    /// Bytes of all tensors.
    pub fn n_bytes(&self) -> u64 {
        self.inner.n_bytes
    }

    /// The model as llama-bench names it: architecture, size label and file type
    /// (`gemma3 270M Q4_K - Medium`).
    pub fn description(&self) -> &str {
        &self.inner.description
    }

    pub(crate) fn weights(&self) -> &Weights {
        &self.inner.weights
    }

    /// A session for generating with this model: a KV cache of `options.n_ctx` positions and
    /// compute buffers reserved once for the largest step. `Err` for an encoder model (use
    /// [`Model::embed`]) or bad options.
    pub fn session(&self, options: SessionOptions) -> Result<Session> {
        Session::new(self.clone(), options)
    }
}

/// The weight tensors as placed for the device: one context (named as in the file, plus
/// `output.weight` when a tied output projection has a device copy) and the buffers holding
/// the data.
struct Placed {
    ctx: Context,
    /// Whether every weight is the file's mapped bytes.
    mapped: bool,
    /// Bytes of the device's copies.
    device_bytes: usize,
    /// Bytes of the CPU repack buffer.
    repacked_bytes: usize,
    // Hold the weights' memory.
    _buffers: Vec<Buffer>,
}

/// Tensors of the input layer: read a few rows per step by GET_ROWS, kept on the CPU.
const INPUT_LAYER: [&str; 3] = [
    "token_embd.weight",
    "position_embd.weight",
    "token_types.weight",
];

impl Placed {
    /// Places `file`'s tensors for `device`: on the CPU, all bound to the file's bytes (copied
    /// when the file is not mapped); elsewhere as the module says. `tied_output`: the model
    /// projects its output with the token embeddings when the file has no `output.weight`.
    /// `progress(bytes_done, bytes_total)` as for [`GgufFile::load_tensors_with_progress`]:
    /// on another device, after each tensor copied to it. `repack`: on the CPU, the weights
    /// [`repackable`] go to the CPU's repack buffer type.
    fn new(
        file: &GgufFile,
        device: &Device,
        tied_output: bool,
        repack: bool,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Placed> {
        let cpu = backend::dev_by_type(DeviceType::Cpu)
            .ok_or_else(|| Error::InvalidArgument("no CPU device is registered".into()))?;
        if device.dev_type() == DeviceType::Cpu {
            let repack_buft = backend::cpu_repack_buffer_type();
            let takes = if repack {
                repackable(file.tensors(), &repack_buft)
            } else {
                Vec::new()
            };
            if takes.iter().any(|&t| t) {
                return Placed::repacked(file, &cpu, &repack_buft, &takes, progress);
            }
            let t = file.load_tensors_with_progress(&device.init(None)?, progress)?;
            t.buffer.set_usage(BufferUsage::Weights);
            return Ok(Placed {
                ctx: t.ctx,
                mapped: t.mapped,
                device_bytes: 0,
                repacked_bytes: 0,
                _buffers: vec![t.buffer],
            });
        }
        let max = device.buffer_type().get_max_size();
        let infos = file.tensors();
        let ctx = Context::for_metadata(infos.len() + 1, 0)?;
        let new = |info: &TensorInfo, name: &str| -> Result<Tensor> {
            let t = ctx.new_tensor(info.ty(), &info.ne())?;
            t.set_name(name);
            Ok(t)
        };
        let mut host: Vec<(Tensor, &TensorInfo)> = Vec::new();
        let mut dev: Vec<(Tensor, &TensorInfo)> = Vec::new();
        for info in infos {
            let t = new(info, info.name())?;
            if INPUT_LAYER.contains(&info.name()) || info.size() > max {
                host.push((t, info));
            } else {
                dev.push((t, info));
            }
        }
        if tied_output && file.find_tensor("output.weight").is_none() {
            if let Some(embd) = infos.iter().find(|i| i.name() == INPUT_LAYER[0]) {
                if embd.size() <= max {
                    dev.push((new(embd, "output.weight")?, embd));
                }
            }
        }
        let mut buffers = Vec::new();
        let mapped = dev.is_empty() && file.file_bytes().is_mapped();
        if !host.is_empty() {
            let largest = host.iter().map(|(_, i)| i.size()).max().unwrap_or(0);
            let buf = cpu.buffer_from_host_bytes(file.file_bytes().clone(), largest)?;
            for (t, info) in &host {
                backend::tensor_alloc(&buf, t, info.file_range().start)?;
            }
            buffers.push(buf);
        }
        let mut device_bytes = 0;
        if !dev.is_empty() {
            let buf = backend::alloc_ctx_tensors_from_buft(&ctx, &device.buffer_type())?;
            let total = dev.iter().map(|(_, i)| i.size()).sum();
            for (t, info) in &dev {
                t.set_bytes(file.data_of(info), 0)?;
                device_bytes += info.size();
                progress(device_bytes, total);
            }
            buffers.push(buf);
        }
        for b in &buffers {
            b.set_usage(BufferUsage::Weights);
        }
        Ok(Placed {
            ctx,
            mapped,
            device_bytes,
            repacked_bytes: 0,
            _buffers: buffers,
        })
    }

    /// Places `file`'s tensors on the CPU with those marked in `takes` (one flag per tensor of
    /// the file) in a buffer of `repack` (set from the file's bytes, whose mapped pages are
    /// then released), the others bound to the file's bytes.
    fn repacked(
        file: &GgufFile,
        cpu: &Device,
        repack: &ggml::BufferType,
        takes: &[bool],
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Placed> {
        let infos = file.tensors();
        let ctx = Context::for_metadata(infos.len(), 0)?;
        let mut moved = Vec::new();
        let largest = infos.iter().map(|i| i.size()).max().unwrap_or(0);
        let mapped = cpu.buffer_from_host_bytes(file.file_bytes().clone(), largest)?;
        for (info, &take) in infos.iter().zip(takes) {
            let t = ctx.new_tensor(info.ty(), &info.ne())?;
            t.set_name(info.name());
            if take {
                moved.push((t, info));
            } else {
                backend::tensor_alloc(&mapped, &t, info.file_range().start)?;
            }
        }
        // every tensor not bound to the file above
        let buf = backend::alloc_ctx_tensors_from_buft(&ctx, repack)?;
        let total = moved.iter().map(|(_, i)| i.size()).sum();
        let mut done = 0;
        for (t, info) in &moved {
            t.set_bytes(file.data_of(info), 0)?;
            done += info.size();
            progress(done, total);
        }
        // released once every one is read (a read faults in the pages around it)
        for (_, info) in &moved {
            file.file_bytes().release(info.file_range())?;
        }
        let repacked_bytes = buf.get_size();
        for b in [&mapped, &buf] {
            b.set_usage(BufferUsage::Weights);
        }
        Ok(Placed {
            ctx,
            mapped: file.file_bytes().is_mapped(),
            device_bytes: 0,
            repacked_bytes,
            _buffers: vec![mapped, buf],
        })
    }
}

/// For each tensor of `infos`, whether it goes to the CPU's repack buffer type `repack`: a
/// weight only MUL_MAT reads (2-D, or 3-D for MUL_MAT_ID's experts; not the input layer's
/// embeddings, which GET_ROWS reads, and the tied output projection with them) of a type
/// the buffer type has a layout for (it takes a tensor of that type).
fn repackable(infos: &[TensorInfo], repack: &ggml::BufferType) -> Vec<bool> {
    let mut layouts: Vec<(ggml::Type, bool)> = Vec::new();
    let mut has_layout = |ty: ggml::Type| {
        if let Some(&(_, ok)) = layouts.iter().find(|(t, _)| *t == ty) {
            return ok;
        }
        let ok = Context::for_metadata(1, 0)
            .and_then(|c| {
                c.new_tensor_2d(ty, ty.blck_size() as i64, 1)?;
                backend::alloc_ctx_tensors_from_buft(&c, repack)
            })
            .is_ok();
        layouts.push((ty, ok));
        ok
    };
    infos
        .iter()
        .map(|i| {
            let matrix = matches!(i.n_dims(), 2 | 3);
            matrix && !INPUT_LAYER.contains(&i.name()) && has_layout(i.ty())
        })
        .collect()
}

/// llama.cpp's name of `general.file_type` (`llama_model_ftype_name`) for the common types;
/// else the type holding the most bytes of 2-d weights.
fn file_type_name(file: &GgufFile) -> String {
    let named = match file.get("general.file_type").and_then(|v| v.as_integer()) {
        Some(0) => "all F32",
        Some(1) => "F16",
        Some(2) => "Q4_0",
        Some(3) => "Q4_1",
        Some(7) => "Q8_0",
        Some(8) => "Q5_0",
        Some(9) => "Q5_1",
        Some(10) => "Q2_K - Medium",
        Some(11) => "Q3_K - Small",
        Some(12) => "Q3_K - Medium",
        Some(13) => "Q3_K - Large",
        Some(14) => "Q4_K - Small",
        Some(15) => "Q4_K - Medium",
        Some(16) => "Q5_K - Small",
        Some(17) => "Q5_K - Medium",
        Some(18) => "Q6_K",
        Some(32) => "BF16",
        _ => "",
    };
    if !named.is_empty() {
        return named.to_string();
    }
    let mut by_type: Vec<(ggml::Type, usize)> = Vec::new();
    for t in file.tensors().iter().filter(|t| t.n_dims() >= 2) {
        match by_type.iter_mut().find(|(ty, _)| *ty == t.ty()) {
            Some((_, n)) => *n += t.size(),
            None => by_type.push((t.ty(), t.size())),
        }
    }
    by_type
        .into_iter()
        .max_by_key(|&(_, n)| n)
        .map_or_else(|| "none".to_string(), |(ty, _)| ty.name().to_string())
}
