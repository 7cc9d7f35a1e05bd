//! Running cases on a device: allocation with guard tensors, the public tensor set/get API, the
//! backend's graph compute, and the comparison with the f64 reference.

use ggml::{backend, Backend, Buffer, Device, Tensor, Type};

use crate::case::{Case, Metric};
use crate::compare::{compare, Comparison};
use crate::host::{read_strided, round_host, shape, Host};
use crate::instance::{instantiate, Instance};

/// Elements of each guard tensor (GGML's sentinels are `F32[1024]`).
const GUARD_ELEMENTS: i64 = 1024;
/// Byte that fills every computed tensor before the run, so that an element a kernel forgets
/// to write reads as NaN (or -1 for integers) and fails.
const POISON: u8 = 0xff;

/// What happened to a case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Every output within the threshold, guards intact.
    Pass,
    /// An output beyond the threshold, a guard overwritten, or the build or compute failed.
    Fail,
    /// The device's `supports_op` refused a node of the case (not a failure).
    NotSupported,
    /// Nothing to compare with (a fixture without this case, stale, or refused by GGML).
    Skipped,
}

/// The result of one case on one device.
#[derive(Clone, Debug)]
pub struct CaseResult {
    /// The case name, `OP(var=value,…)`.
    pub case: String,
    /// The op name.
    pub op: String,
    /// The device's name.
    pub device: String,
    /// Pass, fail, not supported or skipped.
    pub status: Status,
    /// The largest NMSE over the outputs, when outputs were compared.
    pub error: Option<f64>,
    /// The metric's threshold (0 for exact).
    pub threshold: f64,
    /// One line on why: the failure, what is unsupported, why skipped (empty when passed).
    pub message: String,
    /// Detail for `-v`: one line per output (and per guard problem).
    pub detail: Vec<String>,
}

impl CaseResult {
    pub(crate) fn new(case: &Case, device: &str, status: Status, message: String) -> CaseResult {
        CaseResult {
            case: case.name().to_string(),
            op: case.op().to_string(),
            device: device.to_string(),
            status,
            error: None,
            threshold: case.metric.threshold(),
            message,
            detail: Vec::new(),
        }
    }
}

impl std::fmt::Display for CaseResult {
    /// `NAME: OK`, `NAME: FAIL (why)`, `NAME: not supported`, `NAME: skipped (why)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.status {
            Status::Pass => write!(f, "{}: OK", self.case),
            Status::Fail => write!(f, "{}: FAIL ({})", self.case, self.message),
            Status::NotSupported => write!(f, "{}: not supported", self.case),
            Status::Skipped => write!(f, "{}: skipped ({})", self.case, self.message),
        }
    }
}

/// Counts of a run, printed as GGML's closing line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Cases that passed.
    pub passed: usize,
    /// Cases that failed.
    pub failed: usize,
    /// Cases not supported or skipped.
    pub skipped: usize,
}

impl Summary {
    /// Counts `r`.
    pub fn add(&mut self, r: &CaseResult) {
        match r.status {
            Status::Pass => self.passed += 1,
            Status::Fail => self.failed += 1,
            Status::NotSupported | Status::Skipped => self.skipped += 1,
        }
    }
}

impl std::fmt::Display for Summary {
    /// `N passed, M failed, K skipped`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} passed, {} failed, {} skipped",
            self.passed, self.failed, self.skipped
        )
    }
}

/// The registered devices, or the one named `name` (case-insensitive); `Err` naming `name` when
/// no device has it.
pub fn devices(name: Option<&str>) -> Result<Vec<Device>, String> {
    let all: Vec<Device> = (0..backend::dev_count())
        .filter_map(backend::dev_get)
        .collect();
    match name {
        None => Ok(all),
        Some(n) => {
            let found: Vec<Device> = all
                .iter()
                .filter(|d| d.name().eq_ignore_ascii_case(n))
                .cloned()
                .collect();
            if found.is_empty() {
                let names: Vec<String> = all.iter().map(Device::name).collect();
                Err(format!(
                    "device {n:?} is not registered (devices: {})",
                    names.join(", ")
                ))
            } else {
                Ok(found)
            }
        }
    }
}

/// A device with a backend initialised on it, ready to run cases.
pub struct Target {
    /// The device.
    pub device: Device,
    /// A backend on it.
    pub backend: Backend,
}

impl Target {
    /// Initialises a backend on `device` (`dev.init(None)`).
    pub fn new(device: Device) -> Result<Target, String> {
        let backend = device
            .init(None)
            .map_err(|e| format!("device {}: init failed: {e}", device.name()))?;
        Ok(Target { device, backend })
    }

    /// Runs `case` with base seed `seed` and compares its outputs with the f64 reference.
    pub fn run(&self, case: &Case, seed: u64) -> CaseResult {
        let dev = self.device.name();
        let computed = match self.compute(case, seed) {
            Ok(c) => c,
            Err(r) => return *r,
        };
        let want = match case.reference(&computed.inputs) {
            Ok(w) => w,
            Err(e) => {
                return CaseResult::new(case, &dev, Status::Fail, format!("the reference {e}"))
            }
        };
        if want.len() != computed.outputs.len() {
            let msg = format!(
                "the reference gave {} outputs, the graph has {}",
                want.len(),
                computed.outputs.len()
            );
            return CaseResult::new(case, &dev, Status::Fail, msg);
        }
        let want: Vec<Host> = want
            .into_iter()
            .zip(&computed.layouts)
            .map(|(mut h, &(ty, _, _))| {
                round_host(ty, &mut h);
                h
            })
            .collect();
        judge(case, &dev, &computed, &want, "expected")
    }

    /// Builds `case` on the device: its inputs from base seed `seed`, its graph, every tensor
    /// placed in one buffer between guard tensors and the inputs written, ready to compute
    /// (what `ggml bench` times). `Err` is the finished result: failed, or not supported when
    /// the device's `supports_op` refuses a node.
    pub fn prepare(&self, case: &Case, seed: u64) -> Result<Prepared, Box<CaseResult>> {
        let dev = self.device.name();
        let fail = |msg: String| Box::new(CaseResult::new(case, &dev, Status::Fail, msg));
        let inst = instantiate(case, seed).map_err(fail)?;
        if let Some(t) = inst
            .ctx
            .tensors()
            .iter()
            .find(|t| !self.device.supports_op(t))
        {
            let srcs: Vec<String> = (0..ggml::tensor::MAX_SRC)
                .filter_map(|i| t.src(i).map(|s| s.ty().name().to_string()))
                .collect();
            let msg = format!("{} of {} from [{}]", t.op().name(), t.ty(), srcs.join(", "));
            return Err(Box::new(CaseResult::new(
                case,
                &dev,
                Status::NotSupported,
                msg,
            )));
        }
        let (buffer, guards) = self.allocate(&inst).map_err(fail)?;
        for (t, bytes) in &inst.bases {
            t.set_bytes(bytes, 0)
                .map_err(|e| fail(format!("writing an input failed: {e}")))?;
        }
        Ok(Prepared {
            inst,
            guards,
            _buffer: buffer,
        })
    }

    /// Allocates, initialises and computes `case`; `Err` is the finished (failed or not
    /// supported) result, and that of a [`Metric::ComputeFails`] case.
    pub(crate) fn compute(&self, case: &Case, seed: u64) -> Result<Computed, Box<CaseResult>> {
        let dev = self.device.name();
        let fail = |msg: String| Box::new(CaseResult::new(case, &dev, Status::Fail, msg));
        let prepared = self.prepare(case, seed)?;
        let inst = &prepared.inst;
        let done = self.backend.graph_compute(&inst.graph);
        if let Metric::ComputeFails(needle) = case.metric {
            let outcome = match done {
                Ok(()) => Err(format!(
                    "compute succeeded; expected an error mentioning {needle:?}"
                )),
                Err(e) if !e.to_string().contains(needle) => Err(format!(
                    "compute failed with \"{e}\"; expected an error mentioning {needle:?}"
                )),
                Err(_) => check_guards(&prepared.guards),
            };
            return Err(match outcome {
                Ok(()) => Box::new(CaseResult::new(case, &dev, Status::Pass, String::new())),
                Err(msg) => fail(msg),
            });
        }
        done.map_err(|e| fail(format!("compute failed: {e}")))?;
        let mut outputs = Vec::new();
        for (k, t) in inst.outputs.iter().enumerate() {
            outputs.push(read_tensor(t).map_err(|e| fail(format!("reading output {k}: {e}")))?);
        }
        check_guards(&prepared.guards).map_err(fail)?;
        check_inputs(inst).map_err(fail)?;
        Ok(Computed {
            layouts: inst
                .outputs
                .iter()
                .map(|t| (t.ty(), t.ne(), t.nb()))
                .collect(),
            inputs: prepared.inst.hosts,
            outputs,
        })
    }

    /// Places every tensor that owns memory in one buffer of the device's type, in creation
    /// order, with a guard tensor before the first and after each; fills computed tensors with
    /// [`POISON`] and guards with their pattern.
    fn allocate(&self, inst: &Instance) -> Result<(Buffer, Vec<Guard>), String> {
        let owners: Vec<Tensor> = inst
            .ctx
            .tensors()
            .into_iter()
            .filter(|t| t.view_src().is_none())
            .collect();
        let mut guards = Vec::new();
        for k in 0..=owners.len() {
            let g = inst
                .ctx
                .new_tensor_1d(Type::F32, GUARD_ELEMENTS)
                .map_err(|e| e.to_string())?;
            g.set_name(&format!("guard_{k}"));
            let pattern: Vec<u8> = (0..g.nbytes())
                .map(|i| (i.wrapping_mul(131) ^ k.wrapping_mul(29)) as u8 | 1)
                .collect();
            guards.push((g, pattern));
        }
        let buft = self.device.buffer_type();
        let align = buft.get_alignment().max(1);
        let sequence = std::iter::once(&guards[0].0)
            .chain(owners.iter().zip(&guards[1..]).flat_map(|(t, g)| [t, &g.0]));
        let mut order: Vec<(Tensor, usize)> = Vec::new();
        let mut end = 0usize;
        for t in sequence {
            let at = end.next_multiple_of(align);
            end = at + buft.get_alloc_size(t);
            order.push((t.clone(), at));
        }
        let buffer = buft
            .alloc_buffer(end.max(1))
            .map_err(|e| format!("allocating {end} bytes on {}: {e}", self.device.name()))?;
        buffer
            .clear(POISON)
            .map_err(|e| format!("clearing the buffer: {e}"))?;
        for (t, at) in &order {
            ggml::alloc::tensor_alloc(&buffer, t, *at).map_err(|e| e.to_string())?;
        }
        for (g, pattern) in &guards {
            g.set_bytes(pattern, 0).map_err(|e| e.to_string())?;
        }
        Ok((buffer, guards))
    }
}

/// A guard tensor and the bytes it must keep.
type Guard = (Tensor, Vec<u8>);

/// A case built on a device by [`Target::prepare`]: inputs written, nothing computed yet.
pub struct Prepared {
    inst: Instance,
    guards: Vec<Guard>,
    _buffer: Buffer,
}

impl Prepared {
    /// The case's graph (room for 256 nodes).
    pub fn graph(&self) -> &ggml::Graph {
        &self.inst.graph
    }

    /// The builder's outputs, in order.
    pub fn outputs(&self) -> &[Tensor] {
        &self.inst.outputs
    }
}

/// A computed case: its inputs' and outputs' logical values.
pub(crate) struct Computed {
    /// The inputs as the reference reads them.
    pub inputs: Vec<Host>,
    /// The outputs as read back.
    pub outputs: Vec<Host>,
    /// The outputs' types, shapes and strides.
    pub layouts: Vec<(Type, [i64; ggml::MAX_DIMS], [usize; ggml::MAX_DIMS])>,
}

/// A tensor's logical values, read through the public get API from the memory it lives in.
pub(crate) fn read_tensor(t: &Tensor) -> Result<Host, String> {
    let (root, offs) = match t.view_src() {
        Some(r) => (r.clone(), t.view_offs()),
        None => (t.clone(), 0),
    };
    let bytes = root.to_bytes().map_err(|e| e.to_string())?;
    read_strided(t.ty(), shape(&t.ne()), t.nb(), &bytes, offs)
}

fn check_guards(guards: &[Guard]) -> Result<(), String> {
    for (k, (g, pattern)) in guards.iter().enumerate() {
        let got = g.to_bytes().map_err(|e| e.to_string())?;
        if let Some(i) = got.iter().zip(pattern).position(|(a, b)| a != b) {
            let after = if k == 0 {
                "before the first tensor".to_string()
            } else {
                format!("after tensor {}", k - 1)
            };
            return Err(format!(
                "out-of-bounds write: guard {after} changed at byte {i}"
            ));
        }
    }
    Ok(())
}

/// Checks that the graph left every input it does not compute into (in place, or through a
/// copy into a view of it) byte for byte as it was written.
fn check_inputs(inst: &Instance) -> Result<(), String> {
    let tensors = inst.ctx.tensors();
    for (k, (base, bytes)) in inst.bases.iter().enumerate() {
        let written = tensors
            .iter()
            .any(|t| !t.op().is_empty() && t.view_src().is_some_and(|v| v.id() == base.id()));
        if written {
            continue;
        }
        let now = base.to_bytes().map_err(|e| e.to_string())?;
        if let Some(i) = now.iter().zip(bytes).position(|(a, b)| a != b) {
            return Err(format!("input {k} was changed by the graph (byte {i})"));
        }
    }
    Ok(())
}

/// Compares computed outputs with `want` (the reference, or GGML's results, called `what`).
pub(crate) fn judge(
    case: &Case,
    device: &str,
    computed: &Computed,
    want: &[Host],
    what: &str,
) -> CaseResult {
    let mut r = CaseResult::new(case, device, Status::Pass, String::new());
    let mut worst = 0f64;
    for (k, (got, want)) in computed.outputs.iter().zip(want).enumerate() {
        let c: Comparison = compare(got, want, case.metric);
        worst = worst.max(if c.nmse.is_nan() {
            f64::INFINITY
        } else {
            c.nmse
        });
        let max = c.max.as_ref().map_or(String::new(), |m| {
            format!(", {}", m.to_string().replace("expected", what))
        });
        let limit = match case.metric {
            Metric::Exact => "exact".to_string(),
            Metric::IndexSet => "exact index sets".to_string(),
            Metric::Nmse(t) => format!("threshold {t:.0e}"),
            Metric::ComputeFails(needle) => format!("an error mentioning {needle:?}"),
        };
        r.detail.push(format!(
            "output {k} ({} {:?}): nmse={:.3e} ({limit}){max}",
            computed.layouts[k].0, got.ne, c.nmse
        ));
        if let Some(why) = c.failure {
            if r.status == Status::Pass {
                r.status = Status::Fail;
                r.message = if computed.outputs.len() > 1 {
                    format!("output {k}: {why}{max}")
                } else {
                    format!("{why}{max}")
                };
            }
        }
    }
    r.error = Some(worst);
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::{Input, Layout, Vars};

    #[test]
    fn every_tensor_is_fenced_by_guards_that_catch_writes() {
        let cpu = backend::dev_by_type(ggml::DeviceType::Cpu).unwrap();
        let target = Target::new(cpu).unwrap();
        let case = Case::new(
            "ADD",
            Vars::new(),
            vec![
                Input::new(Type::F32, &[5, 3]).layout(Layout::Padded),
                Input::new(Type::F32, &[5, 1]),
            ],
            |ctx, x| ctx.add(&x[0], &x[1]),
            |x| x[0].clone(),
        );
        let inst = instantiate(&case, 1).unwrap();
        let (buffer, guards) = target.allocate(&inst).unwrap();
        // Two inputs that own memory and the sum: four guards around three tensors.
        assert_eq!(guards.len(), 4);
        let mut spans: Vec<(usize, usize, String)> = inst
            .ctx
            .tensors()
            .iter()
            .filter(|t| t.view_src().is_none())
            .map(|t| {
                let at = t.data_offset().unwrap();
                (at, at + t.nbytes(), t.name())
            })
            .collect();
        spans.sort();
        let names: Vec<&str> = spans.iter().map(|s| s.2.as_str()).collect();
        assert_eq!(names[0], "guard_0");
        assert!(
            names[1].starts_with("leaf_") && names[2] == "guard_1",
            "{names:?}"
        );
        assert!(
            names[3].starts_with("leaf_") && names[4] == "guard_2",
            "{names:?}"
        );
        assert!(
            names[5].starts_with("node_") && names[6] == "guard_3",
            "{names:?}"
        );
        assert!(
            spans.windows(2).all(|w| w[0].1 <= w[1].0),
            "overlap: {spans:?}"
        );
        assert!(spans.last().unwrap().1 <= buffer.get_size());
        check_guards(&guards).unwrap();
        // A byte written past the end of the first input lands in guard_1.
        guards[1].0.set_bytes(&[0], 7).unwrap();
        let e = check_guards(&guards).unwrap_err();
        assert_eq!(
            e,
            "out-of-bounds write: guard after tensor 0 changed at byte 7"
        );
    }

    #[test]
    fn an_input_changed_behind_the_graph_is_caught() {
        let cpu = backend::dev_by_type(ggml::DeviceType::Cpu).unwrap();
        let target = Target::new(cpu).unwrap();
        let case = Case::new(
            "NEG",
            Vars::new(),
            vec![Input::new(Type::F32, &[4])],
            |ctx, x| ctx.neg(&x[0]),
            |x| x[0].clone(),
        );
        let inst = instantiate(&case, 1).unwrap();
        let _buffers = target.allocate(&inst).unwrap();
        let (base, bytes) = &inst.bases[0];
        base.set_bytes(bytes, 0).unwrap();
        check_inputs(&inst).unwrap();
        base.set_bytes(&[bytes[5] ^ 1], 5).unwrap();
        assert_eq!(
            check_inputs(&inst).unwrap_err(),
            "input 0 was changed by the graph (byte 5)"
        );
    }
}
