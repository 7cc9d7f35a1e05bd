//! The backend family beyond the CPU backend and buffers of `lib.rs`: devices, buffer types,
//! the registry and dynamic loading, backend initialisation, events, graph plans, tensor data
//! transfer (synchronous and asynchronous) and the scheduler, under ggmlR's names.

use crate::args::{self, bad, bytes, flag, handle, lib, string, Slot};
use crate::rthread::wait;
use crate::{backend_arg, buffer_arg, graph_arg, status, tensor_arg, wrap_opt, BACKEND};
use extendr_api::prelude::*;
use extendr_api::Result;
use ggml::backend::{SplitState, TensorInfo};
use ggml::{backend, Backend, BufferType, Device, DeviceType, ErrorKind, Event, GraphPlan};
use ggml::{Registry, Sched, Tensor, Type};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const DEVICE: &str = "ggml backend device";
const BUFT: &str = "ggml backend buffer type";
const REG: &str = "ggml backend registry";
const EVENT: &str = "ggml backend event";
const PLAN: &str = "ggml graph plan";
const SCHED: &str = "ggml backend scheduler";

fn device_arg(obj: &Robj) -> Result<Device> {
    handle(obj, "device", DEVICE)
}

fn buft_arg(obj: &Robj) -> Result<BufferType> {
    handle(obj, "buft", BUFT)
}

fn reg_arg(obj: &Robj) -> Result<Registry> {
    handle(obj, "reg", REG)
}

fn event_arg(obj: &Robj) -> Result<Event> {
    handle(obj, "event", EVENT)
}

fn sched_arg(obj: &Robj) -> Result<Sched> {
    handle(obj, "sched", SCHED)
}

/// A `ggml_backend_device_type_*()` code.
fn dev_type_arg(obj: &Robj, arg: &str) -> Result<DeviceType> {
    Ok(match args::int_in(obj, arg, 0.0, 4.0)? as u8 {
        0 => DeviceType::Cpu,
        1 => DeviceType::Gpu,
        2 => DeviceType::Igpu,
        3 => DeviceType::Accel,
        _ => DeviceType::Meta,
    })
}

/// An index below `n`, or an error naming `arg` (GGML asserts; ggmlR raises an R error).
fn index_below(obj: &Robj, arg: &str, n: usize, what: &str) -> Result<usize> {
    let i = bytes(obj, arg)?;
    if i < n {
        Ok(i)
    } else {
        Err(bad(
            arg,
            format!("{i} is out of range: there are {n} {what}"),
        ))
    }
}

/// A backend made by an init function, or `NULL` when it fails (as in ggmlR).
fn backend_or_null(r: ggml::Result<Backend>) -> Robj {
    wrap_opt(r.ok())
}

// ---- device types -----------------------------------------------------------------------------

/// Device type constants
///
/// `GGML_BACKEND_DEVICE_TYPE_*` as integers: CPU 0, GPU 1, integrated GPU 2, accelerator 3.
/// @return An integer.
/// @examples
/// ggml_backend_device_type_cpu()
/// ggml_backend_device_type_gpu()
/// ggml_backend_device_type_igpu()
/// ggml_backend_device_type_accel()
/// ggml_backend_dev_type(ggml_backend_dev_get(0)) == ggml_backend_device_type_cpu()
/// @export
#[extendr]
fn ggml_backend_device_type_cpu() -> i32 {
    DeviceType::Cpu as i32
}

/// @rdname ggml_backend_device_type_cpu
/// @export
#[extendr]
fn ggml_backend_device_type_gpu() -> i32 {
    DeviceType::Gpu as i32
}

/// @rdname ggml_backend_device_type_cpu
/// @export
#[extendr]
fn ggml_backend_device_type_igpu() -> i32 {
    DeviceType::Igpu as i32
}

/// @rdname ggml_backend_device_type_cpu
/// @export
#[extendr]
fn ggml_backend_device_type_accel() -> i32 {
    DeviceType::Accel as i32
}

// ---- devices ------------------------------------------------------------------------------------

/// Backend devices
///
/// The devices of every registered backend (`ggml_backend_dev_*`). `ggml_backend_dev_count`
/// counts them; `ggml_backend_dev_get` gives one by 0-based index (an out-of-range index is an
/// R error); `ggml_backend_dev_by_name` (case-insensitive) and `ggml_backend_dev_by_type` give
/// the first match or `NULL`. `ggml_backend_dev_memory` gives `c(free, total)` in bytes,
/// `ggml_backend_dev_get_props` a list of `name`, `description`, `memory_free`,
/// `memory_total`, `type`, `device_id` (`""` when unknown) and `caps` (named logical: `async`,
/// `host_buffer`, `buffer_from_host_ptr`, `events`). `ggml_backend_dev_supports_op` and
/// `ggml_backend_dev_offload_op` take a result tensor whose op and sources define the
/// operation. `ggml_backend_dev_init` starts a backend on the device (`NULL` if it cannot). `ggml_backend_get_device` gives a backend's device, and
/// `ggml_backend_device_register` adds a device to the registry.
/// @param index A 0-based device index.
/// @param name A device name such as `"CPU"`.
/// @param type A `ggml_backend_device_type_*()` value.
/// @param device A device.
/// @param op A tensor made by an operator.
/// @param buft A buffer type.
/// @param params `NULL` or a string of backend parameters.
/// @param backend A backend.
/// @return See the description.
/// @examples
/// n <- ggml_backend_dev_count()
/// cpu <- ggml_backend_dev_get(0)
/// ggml_backend_dev_name(cpu)
/// ggml_backend_dev_description(cpu)
/// ggml_backend_dev_memory(cpu)
/// ggml_backend_dev_type(cpu)
/// str(ggml_backend_dev_get_props(cpu))
/// identical(ggml_backend_dev_name(ggml_backend_dev_by_name("cpu")), "CPU")
/// ggml_backend_dev_by_type(ggml_backend_device_type_cpu())
/// ctx <- ggml_init(1024 * 1024)
/// a <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4)
/// ggml_backend_dev_supports_op(cpu, ggml_relu(ctx, a))
/// ggml_backend_dev_offload_op(cpu, ggml_relu(ctx, a))
/// ggml_backend_dev_supports_buft(cpu, ggml_backend_dev_buffer_type(cpu))
/// b <- ggml_backend_dev_init(cpu)
/// ggml_backend_dev_name(ggml_backend_get_device(b))
/// ggml_backend_device_register(cpu)
/// @export
#[extendr]
fn ggml_backend_dev_count() -> f64 {
    backend::dev_count() as f64
}

/// @rdname ggml_backend_dev_count
/// @export
#[extendr]
fn ggml_backend_dev_get(index: Robj) -> Result<Robj> {
    let i = index_below(&index, "index", backend::dev_count(), "devices")?;
    Ok(wrap_opt(backend::dev_get(i)))
}

/// @rdname ggml_backend_dev_count
/// @export
#[extendr]
fn ggml_backend_dev_by_name(name: Robj) -> Result<Robj> {
    Ok(wrap_opt(backend::dev_by_name(&string(&name, "name")?)))
}

/// @rdname ggml_backend_dev_count
/// @export
#[extendr]
fn ggml_backend_dev_by_type(r#type: Robj) -> Result<Robj> {
    Ok(wrap_opt(backend::dev_by_type(dev_type_arg(
        &r#type, "type",
    )?)))
}

/// @rdname ggml_backend_dev_count
/// @export
#[extendr]
fn ggml_backend_dev_name(device: Robj) -> Result<String> {
    Ok(device_arg(&device)?.name())
}

/// @rdname ggml_backend_dev_count
/// @export
#[extendr]
fn ggml_backend_dev_description(device: Robj) -> Result<String> {
    Ok(device_arg(&device)?.description())
}

/// @rdname ggml_backend_dev_count
/// @export
#[extendr]
fn ggml_backend_dev_memory(device: Robj) -> Result<Robj> {
    let (free, total) = device_arg(&device)?.memory();
    let mut v: Robj = vec![free as f64, total as f64].into();
    v.set_names(["free", "total"])?;
    Ok(v)
}

/// @rdname ggml_backend_dev_count
/// @export
#[extendr]
fn ggml_backend_dev_type(device: Robj) -> Result<i32> {
    Ok(device_arg(&device)?.dev_type() as i32)
}

/// @rdname ggml_backend_dev_count
/// @export
#[extendr]
fn ggml_backend_dev_get_props(device: Robj) -> Result<Robj> {
    let p = device_arg(&device)?.get_props();
    let mut caps: Robj = vec![
        p.caps.async_compute,
        p.caps.host_buffer,
        p.caps.buffer_from_host_ptr,
        p.caps.events,
    ]
    .into();
    caps.set_names(["async", "host_buffer", "buffer_from_host_ptr", "events"])?;
    let values: [Robj; 7] = [
        p.name.into(),
        p.description.into(),
        (p.memory_free as f64).into(),
        (p.memory_total as f64).into(),
        (p.dev_type as i32).into(),
        p.device_id.unwrap_or_default().into(),
        caps,
    ];
    let names = [
        "name",
        "description",
        "memory_free",
        "memory_total",
        "type",
        "device_id",
        "caps",
    ];
    Ok(List::from_names_and_values(names, values)?.into())
}

/// @rdname ggml_backend_dev_count
/// @export
#[extendr]
fn ggml_backend_dev_supports_op(device: Robj, op: Robj) -> Result<bool> {
    Ok(device_arg(&device)?.supports_op(&tensor_arg(&op, "op")?))
}

/// @rdname ggml_backend_dev_count
/// @export
#[extendr]
fn ggml_backend_dev_supports_buft(device: Robj, buft: Robj) -> Result<bool> {
    Ok(device_arg(&device)?.supports_buft(&buft_arg(&buft)?))
}

/// @rdname ggml_backend_dev_count
/// @export
#[extendr]
fn ggml_backend_dev_offload_op(device: Robj, op: Robj) -> Result<bool> {
    Ok(device_arg(&device)?.offload_op(&tensor_arg(&op, "op")?))
}

/// @rdname ggml_backend_dev_count
/// @export
#[extendr]
fn ggml_backend_dev_init(device: Robj, #[extendr(default = "NULL")] params: Robj) -> Result<Robj> {
    let d = device_arg(&device)?;
    let p = args::opt_string(&params, "params")?;
    Ok(backend_or_null(d.init(p.as_deref())))
}

/// @rdname ggml_backend_dev_count
/// @export
#[extendr]
fn ggml_backend_get_device(backend: Robj) -> Result<Robj> {
    Ok(Slot::wrap(backend_arg(&backend)?.get_device()))
}

/// @rdname ggml_backend_dev_count
/// @export
#[extendr(invisible)]
fn ggml_backend_device_register(device: Robj) -> Result<()> {
    backend::device_register(device_arg(&device)?);
    Ok(())
}

// ---- meta device -----------------------------------------------------------------------------

/// One element of a split function's list (`NULL` when absent) as a whole number.
fn split_field(out: &Robj, name: &str) -> std::result::Result<Option<f64>, String> {
    match out.dollar(name) {
        Ok(v) if !v.is_null() => args::whole(&v, name)
            .map(Some)
            .map_err(|e| format!("its `{name}`: {e}")),
        _ => Ok(None),
    }
}

/// ggmlR's reading of a split function's value: `NULL` or not a list is mirrored; `axis` 0 to
/// 3 splits along that dimension (evenly without `ne`, else `ne`'s per-segment, per-device
/// lengths for `n_segments` segments), 10 mirrors, 11 holds partial sums.
fn split_state(out: &Robj, n_devs: usize) -> std::result::Result<SplitState, String> {
    if !out.is_list() {
        return Ok(SplitState::mirrored());
    }
    let axis = split_field(out, "axis")?.unwrap_or(10.0);
    match axis as i64 {
        a @ 0..=3 => {
            let ne = match out.dollar("ne") {
                Ok(v) if !v.is_null() => args::f32s(&v, "ne").map_err(|e| e.to_string())?,
                _ => return Ok(SplitState::axis(a as usize)),
            };
            let n_seg = split_field(out, "n_segments")?.map_or(1, |n| n.max(1.0) as usize);
            let want = n_seg * n_devs;
            let mut lengths: Vec<i64> = ne.iter().take(want.min(256)).map(|&x| x as i64).collect();
            lengths.resize(want, 0);
            Ok(SplitState::segments(a as usize, &lengths, &vec![1; n_seg]))
        }
        10 => Ok(SplitState::mirrored()),
        11 => Ok(SplitState::partial()),
        a => Err(format!(
            "it returned axis {a}; a split state is 0 to 3 (an axis), 10 (mirrored) or 11 (partial)"
        )),
    }
}

/// Calls the split function `id` for `info` (R thread): the state, or why there is none.
fn call_split(id: u64, info: TensorInfo, n_devs: usize) -> std::result::Result<SplitState, String> {
    let names = ["name", "type", "ne", "op", "flags"];
    let values: [Robj; 5] = [
        info.name.clone().into(),
        (info.ty as i32).into(),
        info.ne
            .iter()
            .map(|&n| n as f64)
            .collect::<Vec<f64>>()
            .into(),
        (info.op as i32).into(),
        (info.flags as i32).into(),
    ];
    let state = List::from_names_and_values(names, values)
        .map_err(|e| e.to_string())
        .and_then(|list| crate::rthread::call_r(id, vec![list.into(), (n_devs as i32).into()]))
        .and_then(|out| split_state(&out, n_devs));
    state.map_err(|why| {
        let why = if why.is_empty() { "interrupted" } else { &why };
        format!("for tensor {:?}: {why}", info.name)
    })
}

/// The meta device
///
/// `ggml_backend_meta_device(devs, split_fn)` makes one device over the devices of the list
/// `devs` (1 to 16; the same device may appear twice) for tensor parallelism: each weight
/// (a tensor no op computes) placed in one of its buffers is split over the devices as
/// `split_fn(tensor_info, n_devs)` says, and a backend of it (`ggml_backend_dev_init`)
/// computes a graph on all of them at once. `ggml_backend_dev_type` gives 4 (META) for it.
///
/// `split_fn` is called on R's thread when tensors are allocated, with `tensor_info =
/// list(name, type, ne, op, flags)` (`ne` the 5 sizes) and the number of devices; it returns
/// `list(axis, ne, n_segments)`: `axis` 0 to 3 splits along that dimension (evenly when `ne`
/// is absent; else `ne` gives the length on each device per segment, `[seg0_dev0, seg0_dev1,
/// ..., seg1_dev0, ...]`, for `n_segments` segments, default 1), 10 mirrors the tensor on every
/// device (the default when `axis` is absent or the value is `NULL`), 11 keeps partial sums
/// (F32). As in ggmlR, after an R error in `split_fn` (or a value that is no split state)
/// every tensor is mirrored without calling it again; here that is also an R warning (given
/// at the end of the top-level call; `options(warn = 1)` prints it at once). Lengths that
/// do not fit the tensor are an R error of the allocating call. `env` is accepted for ggmlR's
/// signature (the function is called as it is, in its own environment).
/// @param devs A list of devices.
/// @param split_fn An R function `(tensor_info, n_devs)` giving a split state.
/// @param env `NULL` or an environment (unused).
/// @return A device.
/// @examples
/// cpu <- ggml_backend_dev_get(0)
/// meta <- ggml_backend_meta_device(list(cpu, cpu), function(info, n_devs) {
///   if (info$name == "w") list(axis = 1L) else list(axis = 10L)
/// })
/// ggml_backend_dev_type(meta)  # 4: META
/// backend <- ggml_backend_dev_init(meta)
/// ctx <- ggml_init(1024 * 1024, no_alloc = TRUE)
/// w <- ggml_set_name(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 4), "w")
/// x <- ggml_set_name(ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 3), "x")
/// y <- ggml_mul_mat(ctx, w, x)
/// buf <- ggml_backend_alloc_ctx_tensors(ctx, backend)
/// ggml_backend_tensor_set_data(w, 1:12)  # rows 1-2 on one device, 3-4 on the other
/// ggml_backend_tensor_set_data(x, c(1, 0, 1))
/// ggml_backend_graph_compute(backend, ggml_build_forward_expand(ctx, y))
/// ggml_backend_tensor_get_data(y)  # 4 10 16 22
/// @export
#[extendr]
fn ggml_backend_meta_device(
    devs: Robj,
    split_fn: Robj,
    #[extendr(default = "environment(split_fn)")] env: Robj,
) -> Result<Robj> {
    let items: Vec<Robj> = match devs.as_list() {
        Some(l) if !l.is_empty() => l.values().collect(),
        _ => return Err(bad("devs", "expected a non-empty list of devices")),
    };
    let devices = items
        .iter()
        .enumerate()
        .map(|(i, d)| handle::<Device>(d, &format!("devs[[{}]]", i + 1), DEVICE))
        .collect::<Result<Vec<Device>>>()?;
    if !(env.is_null() || env.is_environment()) {
        return Err(bad("env", "expected an environment or NULL"));
    }
    let fun = crate::rthread::RFun::new(&split_fn, "split_fn")?;
    let failed = Arc::new(AtomicBool::new(false));
    let split = move |info: &TensorInfo, n: usize| {
        if failed.load(Ordering::SeqCst) {
            return SplitState::mirrored();
        }
        let (id, info) = (fun.id(), info.clone());
        let state = crate::rthread::on_r_thread(move || {
            crate::rthread::as_callback(|| call_split(id, info, n)).map_err(|why| {
                let msg = format!(
                    "ggml_backend_meta_device: split_fn failed {why}; this and every later \
                     tensor are mirrored"
                );
                // A warning turned into an error (options(warn = 2)) is caught by R_tryEval.
                let _ = call!("warning", msg);
            })
        });
        state.and_then(|s| s.ok()).unwrap_or_else(|| {
            failed.store(true, Ordering::SeqCst);
            SplitState::mirrored()
        })
    };
    Ok(Slot::wrap(lib(
        "ggml_backend_meta_device",
        backend::meta_device(&devices, split),
    )?))
}

// ---- buffer types -------------------------------------------------------------------------------

/// Buffer types
///
/// GGML's buffer types (`ggml_backend_buft_*`; ggmlR has no function returning one, so these
/// carry GGML's C names). `ggml_backend_dev_buffer_type` and
/// `ggml_backend_get_default_buffer_type` give a device's or backend's type;
/// `ggml_backend_buft_alloc_buffer` allocates `size` bytes of it; the other functions give its
/// name, alignment, maximum buffer size, whether it is host memory and the bytes a tensor
/// needs in it. `ggml_backend_alloc_buffer` allocates a buffer of the backend's default type
/// and `ggml_backend_buffer_get_type` gives a buffer's type.
/// @param device A device.
/// @param backend A backend.
/// @param buft A buffer type.
/// @param buffer A buffer.
/// @param size Bytes.
/// @param tensor A tensor.
/// @return A buffer type, a buffer, a string, a number of bytes or a logical.
/// @examples
/// cpu <- ggml_backend_cpu_init()
/// buft <- ggml_backend_get_default_buffer_type(cpu)
/// ggml_backend_buft_name(buft)
/// ggml_backend_buft_get_alignment(buft)
/// ggml_backend_buft_get_max_size(buft)
/// ggml_backend_buft_is_host(buft)
/// ctx <- ggml_init(1024 * 1024, no_alloc = TRUE)
/// t <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 10)
/// ggml_backend_buft_get_alloc_size(buft, t)
/// buf <- ggml_backend_buft_alloc_buffer(buft, 1024)
/// ggml_backend_buffer_get_size(buf)
/// ggml_backend_buft_name(ggml_backend_buffer_get_type(buf))
/// ggml_backend_buffer_get_size(ggml_backend_alloc_buffer(cpu, 64))
/// ggml_backend_buft_name(ggml_backend_dev_buffer_type(ggml_backend_dev_get(0)))
/// @export
#[extendr]
fn ggml_backend_dev_buffer_type(device: Robj) -> Result<Robj> {
    Ok(Slot::wrap(device_arg(&device)?.buffer_type()))
}

/// @rdname ggml_backend_dev_buffer_type
/// @export
#[extendr]
fn ggml_backend_get_default_buffer_type(backend: Robj) -> Result<Robj> {
    Ok(Slot::wrap(backend_arg(&backend)?.get_default_buffer_type()))
}

/// @rdname ggml_backend_dev_buffer_type
/// @export
#[extendr]
fn ggml_backend_buft_name(buft: Robj) -> Result<String> {
    Ok(buft_arg(&buft)?.name())
}

/// @rdname ggml_backend_dev_buffer_type
/// @export
#[extendr]
fn ggml_backend_buft_alloc_buffer(buft: Robj, size: Robj) -> Result<Robj> {
    let b = buft_arg(&buft)?;
    let n = bytes(&size, "size")?;
    Ok(Slot::wrap(lib(
        "ggml_backend_buft_alloc_buffer",
        b.alloc_buffer(n),
    )?))
}

/// @rdname ggml_backend_dev_buffer_type
/// @export
#[extendr]
fn ggml_backend_buft_get_alignment(buft: Robj) -> Result<f64> {
    Ok(buft_arg(&buft)?.get_alignment() as f64)
}

/// @rdname ggml_backend_dev_buffer_type
/// @export
#[extendr]
fn ggml_backend_buft_get_max_size(buft: Robj) -> Result<f64> {
    Ok(buft_arg(&buft)?.get_max_size() as f64)
}

/// @rdname ggml_backend_dev_buffer_type
/// @export
#[extendr]
fn ggml_backend_buft_is_host(buft: Robj) -> Result<bool> {
    Ok(buft_arg(&buft)?.is_host())
}

/// @rdname ggml_backend_dev_buffer_type
/// @export
#[extendr]
fn ggml_backend_buft_get_alloc_size(buft: Robj, tensor: Robj) -> Result<f64> {
    Ok(buft_arg(&buft)?.get_alloc_size(&tensor_arg(&tensor, "tensor")?) as f64)
}

/// @rdname ggml_backend_dev_buffer_type
/// @export
#[extendr]
fn ggml_backend_alloc_buffer(backend: Robj, size: Robj) -> Result<Robj> {
    let b = backend_arg(&backend)?;
    let n = bytes(&size, "size")?;
    Ok(Slot::wrap(lib(
        "ggml_backend_alloc_buffer",
        b.alloc_buffer(n),
    )?))
}

/// @rdname ggml_backend_dev_buffer_type
/// @export
#[extendr]
fn ggml_backend_buffer_get_type(buffer: Robj) -> Result<Robj> {
    Ok(Slot::wrap(buffer_arg(&buffer)?.get_type()))
}

// ---- registry and loading -----------------------------------------------------------------------

/// Backend registry and dynamic loading
///
/// The registered backends (`ggml_backend_reg_*`): their count, one by 0-based index (out of
/// range is an R error) or case-insensitive name (`NULL` if none), a registry's name and its
/// devices. `ggml_backend_load` loads a backend library (a registry, or `NULL` when it
/// cannot), `ggml_backend_unload` unloads one, `ggml_backend_load_all` loads every
/// backend library found in the usual places (`GGML_BACKEND_PATH`, the executable's and the
/// current directory), and `ggml_backend_register` registers a registry.
/// @param index A 0-based index.
/// @param name A registry name such as `"CPU"`.
/// @param reg A registry.
/// @param path Path of a backend shared library.
/// @return See the description.
/// @examples
/// ggml_backend_reg_count()
/// reg <- ggml_backend_reg_get(0)
/// ggml_backend_reg_name(reg)
/// ggml_backend_reg_dev_count(reg)
/// ggml_backend_dev_name(ggml_backend_reg_dev_get(reg, 0))
/// ggml_backend_reg_name(ggml_backend_reg_by_name("cpu"))
/// ggml_backend_load(tempfile())  # NULL: no such library
/// ggml_backend_load_all()
/// ggml_backend_register(reg)
/// @export
#[extendr]
fn ggml_backend_reg_count() -> f64 {
    backend::reg_count() as f64
}

/// @rdname ggml_backend_reg_count
/// @export
#[extendr]
fn ggml_backend_reg_get(index: Robj) -> Result<Robj> {
    let i = index_below(&index, "index", backend::reg_count(), "registries")?;
    Ok(wrap_opt(backend::reg_get(i)))
}

/// @rdname ggml_backend_reg_count
/// @export
#[extendr]
fn ggml_backend_reg_by_name(name: Robj) -> Result<Robj> {
    Ok(wrap_opt(backend::reg_by_name(&string(&name, "name")?)))
}

/// @rdname ggml_backend_reg_count
/// @export
#[extendr]
fn ggml_backend_reg_name(reg: Robj) -> Result<String> {
    Ok(reg_arg(&reg)?.name())
}

/// @rdname ggml_backend_reg_count
/// @export
#[extendr]
fn ggml_backend_reg_dev_count(reg: Robj) -> Result<f64> {
    Ok(reg_arg(&reg)?.dev_count() as f64)
}

/// @rdname ggml_backend_reg_count
/// @export
#[extendr]
fn ggml_backend_reg_dev_get(reg: Robj, index: Robj) -> Result<Robj> {
    let r = reg_arg(&reg)?;
    let i = index_below(&index, "index", r.dev_count(), "devices in the registry")?;
    Ok(wrap_opt(r.dev_get(i)))
}

/// @rdname ggml_backend_reg_count
/// @export
#[extendr]
fn ggml_backend_load(path: Robj) -> Result<Robj> {
    Ok(wrap_opt(backend::load(string(&path, "path")?).ok()))
}

/// @rdname ggml_backend_reg_count
/// @export
#[extendr(invisible)]
fn ggml_backend_unload(reg: Robj) -> Result<()> {
    lib("ggml_backend_unload", backend::unload(reg_arg(&reg)?))
}

/// @rdname ggml_backend_reg_count
/// @export
#[extendr(invisible)]
fn ggml_backend_load_all() {
    backend::load_all();
}

/// @rdname ggml_backend_reg_count
/// @export
#[extendr(invisible)]
fn ggml_backend_register(reg: Robj) -> Result<()> {
    backend::register(reg_arg(&reg)?);
    Ok(())
}

// ---- backend initialisation ------------------------------------------------------------------

/// Starting backends
///
/// `ggml_backend_init_best` starts the best device's backend (a GPU if there is one, else the
/// CPU); `ggml_backend_init_by_name` the one of the device with that name (case-insensitive);
/// `ggml_backend_init_by_type` the first device of that type. Each gives `NULL` when there is no
/// such device or it cannot start. `ggml_backend_cpu_set_n_threads` sets a
/// CPU backend's thread count (an R error for another backend). Backends are freed by the
/// garbage collector or `ggml_backend_free`.
/// @param name A device name such as `"CPU"`.
/// @param type A `ggml_backend_device_type_*()` value.
/// @param params `NULL` or a string of backend parameters.
/// @param backend A CPU backend.
/// @param n_threads Number of threads, at least 1.
/// @return A backend, or `NULL`; `ggml_backend_cpu_set_n_threads` returns `NULL` invisibly.
/// @examples
/// b <- ggml_backend_init_best()
/// ggml_backend_name(b)
/// ggml_backend_name(ggml_backend_init_by_name("CPU"))
/// ggml_backend_name(ggml_backend_init_by_type(ggml_backend_device_type_cpu()))
/// ggml_backend_cpu_set_n_threads(b, 2)
/// @export
#[extendr]
fn ggml_backend_init_best() -> Robj {
    backend_or_null(backend::init_best())
}

/// @rdname ggml_backend_init_best
/// @export
#[extendr]
fn ggml_backend_init_by_name(
    name: Robj,
    #[extendr(default = "NULL")] params: Robj,
) -> Result<Robj> {
    let n = string(&name, "name")?;
    let p = args::opt_string(&params, "params")?;
    Ok(backend_or_null(backend::init_by_name(&n, p.as_deref())))
}

/// @rdname ggml_backend_init_best
/// @export
#[extendr]
fn ggml_backend_init_by_type(
    r#type: Robj,
    #[extendr(default = "NULL")] params: Robj,
) -> Result<Robj> {
    let t = dev_type_arg(&r#type, "type")?;
    let p = args::opt_string(&params, "params")?;
    Ok(backend_or_null(backend::init_by_type(t, p.as_deref())))
}

/// @rdname ggml_backend_init_best
/// @export
#[extendr(invisible)]
fn ggml_backend_cpu_set_n_threads(backend: Robj, n_threads: Robj) -> Result<()> {
    let b = backend_arg(&backend)?;
    let n = args::int_in(&n_threads, "n_threads", 1.0, 4096.0)? as usize;
    lib("ggml_backend_cpu_set_n_threads", b.set_n_threads(n))
}

// ---- events ---------------------------------------------------------------------------------------

/// Events
///
/// An event marks a point in a backend's stream (`ggml_backend_event_*`).
/// `ggml_backend_event_new` makes one for a device (`NULL` if the device has none; every
/// device of this library has them, the CPU too), `ggml_backend_event_record` records the
/// point after the work queued so far on `backend`, `ggml_backend_event_synchronize` waits for
/// it (an error of that work is an R error), `ggml_backend_event_wait` makes `backend` wait
/// for it before its later work, and `ggml_backend_event_free` frees it (again: harmless).
/// @param device A device.
/// @param event An event.
/// @param backend A backend.
/// @return An event; the others return `NULL` invisibly.
/// @examples
/// cpu <- ggml_backend_cpu_init()
/// ev <- ggml_backend_event_new(ggml_backend_get_device(cpu))
/// ggml_backend_event_record(ev, cpu)
/// ggml_backend_event_wait(cpu, ev)
/// ggml_backend_event_synchronize(ev)
/// ggml_backend_event_free(ev)
/// @export
#[extendr]
fn ggml_backend_event_new(device: Robj) -> Result<Robj> {
    Ok(wrap_opt(Event::new(&device_arg(&device)?).ok()))
}

/// @rdname ggml_backend_event_new
/// @export
#[extendr(invisible)]
fn ggml_backend_event_free(event: Robj) -> Result<()> {
    args::free::<Event>(&event, "event", EVENT, Event::free)
}

/// @rdname ggml_backend_event_new
/// @export
#[extendr(invisible)]
fn ggml_backend_event_record(event: Robj, backend: Robj) -> Result<()> {
    let (e, b) = (event_arg(&event)?, backend_arg(&backend)?);
    lib("ggml_backend_event_record", e.record(&b))
}

/// @rdname ggml_backend_event_new
/// @export
#[extendr(invisible)]
fn ggml_backend_event_synchronize(event: Robj) -> Result<()> {
    let e = event_arg(&event)?;
    let fname = "ggml_backend_event_synchronize";
    lib(fname, wait(fname, move || e.synchronize())?)
}

/// @rdname ggml_backend_event_new
/// @export
#[extendr(invisible)]
fn ggml_backend_event_wait(backend: Robj, event: Robj) -> Result<()> {
    let (b, e) = (backend_arg(&backend)?, event_arg(&event)?);
    lib("ggml_backend_event_wait", b.event_wait(&e))
}

// ---- graph plans ----------------------------------------------------------------------------------

/// Graph plans
///
/// A plan is a graph prepared once for a backend and computed any number of times
/// (`ggml_backend_graph_plan_*`). `ggml_backend_graph_plan_compute` returns GGML's status
/// (`0` success); `ggml_backend_graph_plan_free` frees the plan (again: harmless).
/// @param backend A backend.
/// @param graph A graph.
/// @param plan A plan from `ggml_backend_graph_plan_create`.
/// @return A plan, a status, or `NULL` invisibly.
/// @examples
/// cpu <- ggml_backend_cpu_init()
/// ctx <- ggml_init(1024 * 1024)
/// a <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 2)
/// ggml_set_f32(a, c(-1, 2))
/// out <- ggml_relu(ctx, a)
/// plan <- ggml_backend_graph_plan_create(cpu, ggml_build_forward_expand(ctx, out))
/// ggml_backend_graph_plan_compute(cpu, plan)
/// ggml_get_f32(out)
/// ggml_backend_graph_plan_free(cpu, plan)
/// @export
#[extendr]
fn ggml_backend_graph_plan_create(backend: Robj, graph: Robj) -> Result<Robj> {
    let (b, g) = (backend_arg(&backend)?, graph_arg(&graph)?);
    Ok(Slot::wrap(lib(
        "ggml_backend_graph_plan_create",
        b.graph_plan_create(&g),
    )?))
}

/// @rdname ggml_backend_graph_plan_create
/// @export
#[extendr]
fn ggml_backend_graph_plan_compute(backend: Robj, plan: Robj) -> Result<i32> {
    let b = backend_arg(&backend)?;
    let p: GraphPlan = handle(&plan, "plan", PLAN)?;
    let fname = "ggml_backend_graph_plan_compute";
    status(fname, wait(fname, move || b.graph_plan_compute(&p))?)
}

/// @rdname ggml_backend_graph_plan_create
/// @export
#[extendr(invisible)]
fn ggml_backend_graph_plan_free(backend: Robj, plan: Robj) -> Result<()> {
    backend_arg(&backend)?;
    args::free::<GraphPlan>(&plan, "plan", PLAN, drop)
}

// ---- tensor data --------------------------------------------------------------------------------

/// R values as the bytes of `t`'s type: doubles for F32, F16 and BF16, integers (or whole
/// doubles) for I32, a raw vector for any type (passed through).
fn tensor_bytes(t: &Tensor, data: &Robj) -> Result<Vec<u8>> {
    if data.rtype() == Rtype::Raw {
        return args::raw(data, "data");
    }
    Ok(match t.ty() {
        Type::F32 => bytemuck_f32(&args::f32s(data, "data")?),
        Type::F16 => args::f32s(data, "data")?
            .iter()
            .flat_map(|&v| ggml::f16::from_f32(v).to_le_bytes())
            .collect(),
        Type::BF16 => args::f32s(data, "data")?
            .iter()
            .flat_map(|&v| ggml::bf16::from_f32(v).to_le_bytes())
            .collect(),
        Type::I32 => args::i32s(data, "data")?
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
        other => {
            return Err(bad(
                "data",
                format!("a {} tensor takes a raw vector", other.name()),
            ))
        }
    })
}

fn bytemuck_f32(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Bytes of `t`'s type as an R vector: doubles for F32, F16 and BF16, integers for I32.
fn values_of(t: &Tensor, b: &[u8]) -> Result<Robj> {
    let half = |f: fn([u8; 2]) -> f32| -> Robj {
        b.chunks_exact(2)
            .map(|c| f64::from(f([c[0], c[1]])))
            .collect::<Vec<f64>>()
            .into()
    };
    Ok(match t.ty() {
        Type::F32 => f32s_of(b).into(),
        Type::F16 => half(|c| ggml::f16::from_le_bytes(c).to_f32()),
        Type::BF16 => half(|c| ggml::bf16::from_le_bytes(c).to_f32()),
        Type::I32 => b
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect::<Vec<i32>>()
            .into(),
        other => {
            return Err(bad(
                "tensor",
                format!(
                    "a {} tensor cannot be read as numbers (use ggml_backend_tensor_get_and_sync)",
                    other.name()
                ),
            ))
        }
    })
}

fn f32s_of(b: &[u8]) -> Vec<f64> {
    b.chunks_exact(4)
        .map(|c| f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]])))
        .collect()
}

/// Tensor data through the backend API
///
/// `ggml_backend_tensor_set_data` writes `data` into the tensor wherever its buffer is,
/// starting `offset` bytes in: doubles for F32, F16 and BF16 tensors (converted), integers for
/// I32, a raw vector (bytes as they are, e.g. quantized blocks) for any type.
/// `ggml_backend_tensor_get_data` reads `n_elements` values (all by default) from `offset`
/// bytes in: doubles for F32, F16 and BF16, integers for I32. `ggml_backend_tensor_get_f32_first`
/// reads the first element as a float. Both wait for work queued on the tensor's buffer.
/// @param tensor A tensor with memory.
/// @param data The values.
/// @param offset Bytes into the tensor.
/// @param n_elements `NULL` (to the end) or a number of elements.
/// @return `NULL` invisibly, or the values.
/// @examples
/// cpu <- ggml_backend_cpu_init()
/// ctx <- ggml_init(1024 * 1024, no_alloc = TRUE)
/// t <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4)
/// buf <- ggml_backend_alloc_ctx_tensors(ctx, cpu)
/// ggml_backend_tensor_set_data(t, c(1, 2, 3, 4))
/// ggml_backend_tensor_get_data(t)
/// ggml_backend_tensor_get_data(t, offset = 8, n_elements = 1)
/// ggml_backend_tensor_get_f32_first(t)
/// @export
#[extendr(invisible)]
fn ggml_backend_tensor_set_data(
    tensor: Robj,
    data: Robj,
    #[extendr(default = "0")] offset: Robj,
) -> Result<()> {
    let t = tensor_arg(&tensor, "tensor")?;
    let b = tensor_bytes(&t, &data)?;
    let off = bytes(&offset, "offset")?;
    lib(
        "ggml_backend_tensor_set_data",
        backend::tensor_set(&t, &b, off),
    )
}

/// @rdname ggml_backend_tensor_set_data
/// @export
#[extendr]
fn ggml_backend_tensor_get_data(
    tensor: Robj,
    #[extendr(default = "0")] offset: Robj,
    #[extendr(default = "NULL")] n_elements: Robj,
) -> Result<Robj> {
    let t = tensor_arg(&tensor, "tensor")?;
    let off = bytes(&offset, "offset")?;
    let esize = t.ty().type_size();
    let size = if n_elements.is_null() {
        t.nbytes().checked_sub(off).ok_or_else(|| {
            bad(
                "offset",
                format!("{off} is past the tensor's {} bytes", t.nbytes()),
            )
        })?
    } else {
        bytes(&n_elements, "n_elements")? * esize
    };
    let mut out = vec![0u8; size];
    lib(
        "ggml_backend_tensor_get_data",
        backend::tensor_get(&t, &mut out, off),
    )?;
    values_of(&t, &out)
}

/// @rdname ggml_backend_tensor_set_data
/// @export
#[extendr]
fn ggml_backend_tensor_get_f32_first(tensor: Robj) -> Result<f64> {
    let t = tensor_arg(&tensor, "tensor")?;
    let mut out = [0u8; 4];
    lib(
        "ggml_backend_tensor_get_f32_first",
        backend::tensor_get(&t, &mut out, 0),
    )?;
    Ok(f64::from(f32::from_le_bytes(out)))
}

/// Asynchronous tensor transfers
///
/// `ggml_backend_tensor_set_async` queues a write of `data` (converted as by
/// `ggml_backend_tensor_set_data`; `size` bytes of it, all by default) on the backend's stream
/// and returns at once: the bytes are copied first, so nothing needs to be kept alive.
/// `ggml_backend_tensor_get_async` reads `size` bytes from `offset` as floats (`size / 4`
/// doubles) after the work queued before it. `ggml_backend_tensor_get_and_sync` reads `size`
/// bytes as a raw vector (with `backend = NULL`, a plain read). `ggml_backend_tensor_copy_async`
/// copies `src` into `dst` (same layout), ordered after `backend_src`'s queued work.
/// Differences from ggmlR: ggmlR's `_set_async` writes R's doubles' own bytes and its
/// `_get_async` fills only half its result; here both convert to and from the tensor's floats.
/// @param backend A backend (or `NULL` for `_get_and_sync`).
/// @param tensor A tensor with memory.
/// @param data The values.
/// @param offset Bytes into the tensor.
/// @param size A number of bytes (`NULL`: all of `data`).
/// @param backend_src,backend_dst Backends of the source and destination.
/// @param src,dst Tensors of the same layout.
/// @return `NULL` invisibly, the values, or a raw vector.
/// @examples
/// cpu <- ggml_backend_cpu_init()
/// ctx <- ggml_init(1024 * 1024)
/// a <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4)
/// b <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4)
/// ggml_backend_tensor_set_async(cpu, a, c(1, 2, 3, 4))
/// ggml_backend_tensor_copy_async(cpu, cpu, a, b)
/// ggml_backend_synchronize(cpu)
/// ggml_backend_tensor_get_async(cpu, b, 0, 16)
/// ggml_backend_tensor_get_and_sync(cpu, b, 0, 4)
/// @export
#[extendr(invisible)]
fn ggml_backend_tensor_set_async(
    backend: Robj,
    tensor: Robj,
    data: Robj,
    #[extendr(default = "0")] offset: Robj,
    #[extendr(default = "NULL")] size: Robj,
) -> Result<()> {
    let b = backend_arg(&backend)?;
    let t = tensor_arg(&tensor, "tensor")?;
    let mut v = tensor_bytes(&t, &data)?;
    let off = bytes(&offset, "offset")?;
    if !size.is_null() {
        let n = bytes(&size, "size")?;
        if n > v.len() {
            return Err(bad(
                "size",
                format!("{n} is more than the {} bytes of `data`", v.len()),
            ));
        }
        v.truncate(n);
    }
    lib(
        "ggml_backend_tensor_set_async",
        b.tensor_set_async(&t, v, off),
    )
}

fn get_bytes(
    fname: &str,
    backend: &Robj,
    tensor: &Robj,
    offset: &Robj,
    size: &Robj,
) -> Result<Vec<u8>> {
    let t = tensor_arg(tensor, "tensor")?;
    let off = bytes(offset, "offset")?;
    let n = bytes(size, "size")?;
    if backend.is_null() {
        let mut out = vec![0u8; n];
        lib(fname, backend::tensor_get(&t, &mut out, off))?;
        return Ok(out);
    }
    let b = backend_arg(backend)?;
    let pending = lib(fname, b.tensor_get_async(&t, off, n))?;
    lib(fname, wait(fname, move || pending.wait())?)
}

/// @rdname ggml_backend_tensor_set_async
/// @export
#[extendr]
fn ggml_backend_tensor_get_async(
    backend: Robj,
    tensor: Robj,
    #[extendr(default = "0")] offset: Robj,
    size: Robj,
) -> Result<Vec<f64>> {
    backend_arg(&backend)?;
    let b = get_bytes(
        "ggml_backend_tensor_get_async",
        &backend,
        &tensor,
        &offset,
        &size,
    )?;
    Ok(f32s_of(&b))
}

/// @rdname ggml_backend_tensor_set_async
/// @export
#[extendr]
fn ggml_backend_tensor_get_and_sync(
    backend: Robj,
    tensor: Robj,
    #[extendr(default = "0")] offset: Robj,
    size: Robj,
) -> Result<Robj> {
    let b = get_bytes(
        "ggml_backend_tensor_get_and_sync",
        &backend,
        &tensor,
        &offset,
        &size,
    )?;
    Ok(Raw::from_bytes(&b).into())
}

/// @rdname ggml_backend_tensor_set_async
/// @export
#[extendr(invisible)]
fn ggml_backend_tensor_copy_async(
    backend_src: Robj,
    backend_dst: Robj,
    src: Robj,
    dst: Robj,
) -> Result<()> {
    let bs: Backend = handle(&backend_src, "backend_src", BACKEND)?;
    let bd: Backend = handle(&backend_dst, "backend_dst", BACKEND)?;
    let (s, d) = (tensor_arg(&src, "src")?, tensor_arg(&dst, "dst")?);
    lib(
        "ggml_backend_tensor_copy_async",
        backend::tensor_copy_async(&bs, &bd, &s, &d),
    )
}

// ---- scheduler ----------------------------------------------------------------------------------

/// ggmlR's logical result of a scheduler allocation: `FALSE` when memory ran out, an R error
/// for anything else.
fn allocated(fname: &str, r: ggml::Result<()>) -> Result<bool> {
    match r {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == ErrorKind::AllocFailed => Ok(false),
        Err(e) => lib(fname, Err(e)),
    }
}

/// The backend scheduler
///
/// A scheduler splits a graph across several backends (`ggml_backend_sched_*`). As in ggmlR,
/// `ggml_backend_sched_new` appends a CPU backend of its own to `backends` (so
/// `ggml_backend_sched_get_n_backends` is one more than given); lower indices have higher
/// priority. `_reserve` and `_alloc_graph` return `TRUE` (or `FALSE` when memory ran out),
/// `_graph_compute` and `_graph_compute_async` GGML's status (`0` success), `_get_n_splits`
/// and `_get_n_copies` the splits and copies of the last graph, `_get_backend` the backend at a
/// 0-based index, `_get_tensor_backend` the backend a tensor was assigned (or `NULL`).
/// `_set_tensor_backend` pins a tensor to a backend, `_reset` forgets the assignments and
/// allocations, `_synchronize` waits for queued work, `_free` frees the scheduler (again:
/// harmless).
/// @param backends A list of backends (one may be given bare).
/// @param parallel Whether to keep several copies of the inputs for pipelining.
/// @param graph_size The most nodes a graph may have.
/// @param sched A scheduler.
/// @param graph A graph.
/// @param index A 0-based backend index.
/// @param tensor A tensor of the graph.
/// @param backend One of the scheduler's backends.
/// @return See the description.
/// @examples
/// cpu <- ggml_backend_cpu_init()
/// sched <- ggml_backend_sched_new(list(cpu))
/// ggml_backend_sched_get_n_backends(sched)
/// ctx <- ggml_init(1024 * 1024)
/// a <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4)
/// ggml_set_f32(a, c(-1, 1, -2, 2))
/// out <- ggml_relu(ctx, a)
/// graph <- ggml_build_forward_expand(ctx, out)
/// ggml_backend_sched_reserve(sched, graph)
/// ggml_backend_sched_set_tensor_backend(sched, out, cpu)
/// ggml_backend_sched_alloc_graph(sched, graph)
/// ggml_backend_sched_graph_compute(sched, graph)
/// ggml_get_f32(out)
/// ggml_backend_sched_get_n_splits(sched)
/// ggml_backend_sched_get_n_copies(sched)
/// ggml_backend_name(ggml_backend_sched_get_backend(sched, 0))
/// ggml_backend_sched_get_tensor_backend(sched, out)
/// ggml_backend_sched_reset(sched)
/// ggml_backend_sched_graph_compute_async(sched, graph)
/// ggml_backend_sched_synchronize(sched)
/// ggml_backend_sched_free(sched)
/// @export
#[extendr]
fn ggml_backend_sched_new(
    backends: Robj,
    #[extendr(default = "TRUE")] parallel: Robj,
    #[extendr(default = "2048")] graph_size: Robj,
) -> Result<Robj> {
    let items: Vec<Robj> = match backends.as_list() {
        Some(l) => l.values().collect(),
        None => vec![backends],
    };
    if items.is_empty() {
        return Err(bad(
            "backends",
            "expected at least one backend, got an empty list",
        ));
    }
    let mut bs = items
        .iter()
        .enumerate()
        .map(|(i, b)| handle::<Backend>(b, &format!("backends[[{}]]", i + 1), BACKEND))
        .collect::<Result<Vec<Backend>>>()?;
    bs.push(lib("ggml_backend_sched_new", backend::cpu_init())?);
    let par = flag(&parallel, "parallel")?;
    let size = args::int_in(&graph_size, "graph_size", 1.0, 1e9)? as usize;
    Ok(Slot::wrap(lib(
        "ggml_backend_sched_new",
        backend::sched_new(&bs, size, par),
    )?))
}

/// @rdname ggml_backend_sched_new
/// @export
#[extendr(invisible)]
fn ggml_backend_sched_free(sched: Robj) -> Result<()> {
    args::free::<Sched>(&sched, "sched", SCHED, drop)
}

/// @rdname ggml_backend_sched_new
/// @export
#[extendr]
fn ggml_backend_sched_reserve(sched: Robj, graph: Robj) -> Result<bool> {
    let (s, g) = (sched_arg(&sched)?, graph_arg(&graph)?);
    allocated("ggml_backend_sched_reserve", s.reserve(&g))
}

/// @rdname ggml_backend_sched_new
/// @export
#[extendr]
fn ggml_backend_sched_alloc_graph(sched: Robj, graph: Robj) -> Result<bool> {
    let (s, g) = (sched_arg(&sched)?, graph_arg(&graph)?);
    allocated("ggml_backend_sched_alloc_graph", s.alloc_graph(&g))
}

/// @rdname ggml_backend_sched_new
/// @export
#[extendr]
fn ggml_backend_sched_graph_compute(sched: Robj, graph: Robj) -> Result<i32> {
    let (s, g) = (sched_arg(&sched)?, graph_arg(&graph)?);
    let fname = "ggml_backend_sched_graph_compute";
    status(fname, wait(fname, move || s.graph_compute(&g))?)
}

/// @rdname ggml_backend_sched_new
/// @export
#[extendr]
fn ggml_backend_sched_graph_compute_async(sched: Robj, graph: Robj) -> Result<i32> {
    let (s, g) = (sched_arg(&sched)?, graph_arg(&graph)?);
    crate::custom::refuse_async("ggml_backend_sched_graph_compute_async", &g)?;
    status(
        "ggml_backend_sched_graph_compute_async",
        s.graph_compute_async(&g),
    )
}

/// @rdname ggml_backend_sched_new
/// @export
#[extendr(invisible)]
fn ggml_backend_sched_synchronize(sched: Robj) -> Result<()> {
    let s = sched_arg(&sched)?;
    let fname = "ggml_backend_sched_synchronize";
    lib(fname, wait(fname, move || s.synchronize())?)
}

/// @rdname ggml_backend_sched_new
/// @export
#[extendr(invisible)]
fn ggml_backend_sched_reset(sched: Robj) -> Result<()> {
    sched_arg(&sched)?.reset();
    Ok(())
}

/// @rdname ggml_backend_sched_new
/// @export
#[extendr]
fn ggml_backend_sched_get_n_backends(sched: Robj) -> Result<i32> {
    Ok(sched_arg(&sched)?.get_n_backends() as i32)
}

/// @rdname ggml_backend_sched_new
/// @export
#[extendr]
fn ggml_backend_sched_get_backend(
    sched: Robj,
    #[extendr(default = "0L")] index: Robj,
) -> Result<Robj> {
    let s = sched_arg(&sched)?;
    let i = index_below(
        &index,
        "index",
        s.get_n_backends(),
        "backends in the scheduler",
    )?;
    Ok(wrap_opt(s.get_backend(i)))
}

/// @rdname ggml_backend_sched_new
/// @export
#[extendr]
fn ggml_backend_sched_get_n_splits(sched: Robj) -> Result<i32> {
    Ok(sched_arg(&sched)?.get_n_splits() as i32)
}

/// @rdname ggml_backend_sched_new
/// @export
#[extendr]
fn ggml_backend_sched_get_n_copies(sched: Robj) -> Result<i32> {
    Ok(sched_arg(&sched)?.get_n_copies() as i32)
}

/// @rdname ggml_backend_sched_new
/// @export
#[extendr(invisible)]
fn ggml_backend_sched_set_tensor_backend(sched: Robj, tensor: Robj, backend: Robj) -> Result<()> {
    let s = sched_arg(&sched)?;
    let (t, b) = (tensor_arg(&tensor, "tensor")?, backend_arg(&backend)?);
    lib(
        "ggml_backend_sched_set_tensor_backend",
        s.set_tensor_backend(&t, &b),
    )
}

/// @rdname ggml_backend_sched_new
/// @export
#[extendr]
fn ggml_backend_sched_get_tensor_backend(sched: Robj, tensor: Robj) -> Result<Robj> {
    let s = sched_arg(&sched)?;
    Ok(wrap_opt(
        s.get_tensor_backend(&tensor_arg(&tensor, "tensor")?),
    ))
}

extendr_module! {
    mod backend;
    fn ggml_backend_device_type_cpu;
    fn ggml_backend_device_type_gpu;
    fn ggml_backend_device_type_igpu;
    fn ggml_backend_device_type_accel;
    fn ggml_backend_dev_count;
    fn ggml_backend_dev_get;
    fn ggml_backend_dev_by_name;
    fn ggml_backend_dev_by_type;
    fn ggml_backend_dev_name;
    fn ggml_backend_dev_description;
    fn ggml_backend_dev_memory;
    fn ggml_backend_dev_type;
    fn ggml_backend_dev_get_props;
    fn ggml_backend_dev_supports_op;
    fn ggml_backend_dev_supports_buft;
    fn ggml_backend_dev_offload_op;
    fn ggml_backend_dev_init;
    fn ggml_backend_get_device;
    fn ggml_backend_device_register;
    fn ggml_backend_meta_device;
    fn ggml_backend_dev_buffer_type;
    fn ggml_backend_get_default_buffer_type;
    fn ggml_backend_buft_name;
    fn ggml_backend_buft_alloc_buffer;
    fn ggml_backend_buft_get_alignment;
    fn ggml_backend_buft_get_max_size;
    fn ggml_backend_buft_is_host;
    fn ggml_backend_buft_get_alloc_size;
    fn ggml_backend_alloc_buffer;
    fn ggml_backend_buffer_get_type;
    fn ggml_backend_reg_count;
    fn ggml_backend_reg_get;
    fn ggml_backend_reg_by_name;
    fn ggml_backend_reg_name;
    fn ggml_backend_reg_dev_count;
    fn ggml_backend_reg_dev_get;
    fn ggml_backend_load;
    fn ggml_backend_unload;
    fn ggml_backend_load_all;
    fn ggml_backend_register;
    fn ggml_backend_init_best;
    fn ggml_backend_init_by_name;
    fn ggml_backend_init_by_type;
    fn ggml_backend_cpu_set_n_threads;
    fn ggml_backend_event_new;
    fn ggml_backend_event_free;
    fn ggml_backend_event_record;
    fn ggml_backend_event_synchronize;
    fn ggml_backend_event_wait;
    fn ggml_backend_graph_plan_create;
    fn ggml_backend_graph_plan_compute;
    fn ggml_backend_graph_plan_free;
    fn ggml_backend_tensor_set_data;
    fn ggml_backend_tensor_get_data;
    fn ggml_backend_tensor_get_f32_first;
    fn ggml_backend_tensor_set_async;
    fn ggml_backend_tensor_get_async;
    fn ggml_backend_tensor_get_and_sync;
    fn ggml_backend_tensor_copy_async;
    fn ggml_backend_sched_new;
    fn ggml_backend_sched_free;
    fn ggml_backend_sched_reserve;
    fn ggml_backend_sched_alloc_graph;
    fn ggml_backend_sched_graph_compute;
    fn ggml_backend_sched_graph_compute_async;
    fn ggml_backend_sched_synchronize;
    fn ggml_backend_sched_reset;
    fn ggml_backend_sched_get_n_backends;
    fn ggml_backend_sched_get_backend;
    fn ggml_backend_sched_get_n_splits;
    fn ggml_backend_sched_get_n_copies;
    fn ggml_backend_sched_set_tensor_backend;
    fn ggml_backend_sched_get_tensor_backend;
}
