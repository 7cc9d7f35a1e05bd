#!/usr/bin/env python3
"""Runs op cases on the real GGML (CPU backend) and writes a GGML op fixture.

    run_ggml.py EXPORT.jsonl --out FIXTURE.bin [--threads N] [--timeout S]
    run_ggml.py --selftest
    run_ggml.py --dump FIXTURE.bin

EXPORT is a case export and FIXTURE the binary fixture, both described in FORMAT.md next to
this file. Every case is built by hand through ctypes: each tensor comes from ggml_new_tensor
in a no_alloc context and then gets its fields (type, ne, nb, op, op_params, flags, src,
view_src, view_offs, data) written straight into its struct ggml_tensor. The struct layout,
the limits and the enums are read from the package's ggml.h when the driver starts and
checked against the library's own constructors before any case runs.

GGML reports most misuse by aborting the process, so cases run in a worker process. When the
worker dies or hangs, the case it was on is recorded as refused (status 1) with what GGML
printed, and a fresh worker carries on with the next case.

Only the Python standard library is used. The GGML libraries come from
tools/llama_cpp/build.sh (or --lib-dir).
"""

from __future__ import annotations

import argparse
import base64
import ctypes
import json
import math
import os
import re
import selectors
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TOOLS_DIR = Path(__file__).resolve().parent.parent
BUILD_SH = TOOLS_DIR / "llama_cpp" / "build.sh"

FIXTURE_MAGIC = b"GGMLOPFX"
FIXTURE_VERSION = 1
STATUS_COMPUTED, STATUS_REFUSED, STATUS_NOT_RUN = 0, 1, 2
STATUS_WORDS = {STATUS_COMPUTED: "computed", STATUS_REFUSED: "refused", STATUS_NOT_RUN: "not run"}

# Worker -> driver records: u32 case index (READY_INDEX for the start-up record), u8 status,
# u32 number of outputs, per output (u64 length, bytes), u32 note length, note.
READY_INDEX = 0xFFFFFFFF
CASE_MARKER = "@@ggml-case "  # written to the worker's stderr before each case

# Where GGML keeps its data, in bytes; the CPU backend's own buffers use the same.
DATA_ALIGNMENT = 64


class DriverError(Exception):
    """A problem with the driver's input or environment that stops the whole run."""


class NotExpressible(Exception):
    """A case the driver cannot build as given (status 2)."""


# --------------------------------------------------------------------------------------------
# Locating the build and reading GGML's headers
# --------------------------------------------------------------------------------------------


def find_lib_dir(explicit: str | None) -> Path:
    """The directory with libggml*.so: --lib-dir, else what build.sh --print-dir reports."""
    if explicit:
        path = Path(explicit)
    else:
        try:
            done = subprocess.run([str(BUILD_SH), "--print-dir"], capture_output=True, text=True)
        except OSError as err:
            raise DriverError(f"cannot run {BUILD_SH}: {err}") from err
        if done.returncode != 0:
            raise DriverError(
                f"no GGML build: {done.stderr.strip()} (or pass --lib-dir DIR)")
        path = Path(done.stdout.strip())
    if not (path / "libggml-base.so").is_file():
        raise DriverError(f"--lib-dir {path}: no libggml-base.so there")
    return path


def find_source_dir(lib_dir: Path, explicit: str | None) -> Path:
    """The llama.cpp source tree the libraries were built from (for ggml.h and ggml.c)."""
    if explicit:
        src = Path(explicit)
    else:
        cache = lib_dir.parent / "CMakeCache.txt"
        src = None
        if cache.is_file():
            for line in cache.read_text(errors="replace").splitlines():
                if line.startswith("CMAKE_HOME_DIRECTORY:"):
                    src = Path(line.split("=", 1)[1])
        if src is None:
            raise DriverError(f"cannot find the source tree of {lib_dir} (pass --source-dir)")
    if not (src / "ggml" / "include" / "ggml.h").is_file():
        raise DriverError(f"--source-dir {src}: no ggml/include/ggml.h there")
    return src


def package_id(source_dir: Path) -> str:
    """'name version' of the PyPI package holding the source tree, read from its PKG-INFO."""
    info = source_dir.parent / "PKG-INFO"
    fields = {}
    if info.is_file():
        for line in info.read_text(errors="replace").splitlines():
            key, sep, value = line.partition(": ")
            if sep and key in ("Name", "Version"):
                fields.setdefault(key, value.strip())
    if "Name" in fields and "Version" in fields:
        return f"{fields['Name']} {fields['Version']}"
    return f"llama.cpp source at {source_dir}"


def cpu_model() -> str:
    """The CPU's model name as /proc/cpuinfo gives it."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def strip_c_comments(text: str) -> str:
    """C source without /* */ and // comments."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


class CHeader:
    """The few facts the driver reads from C source: integer #defines, enums, flat structs."""

    C_SCALARS = {
        "char": ctypes.c_char, "bool": ctypes.c_bool, "int": ctypes.c_int,
        "int8_t": ctypes.c_int8, "uint8_t": ctypes.c_uint8,
        "int16_t": ctypes.c_int16, "uint16_t": ctypes.c_uint16,
        "int32_t": ctypes.c_int32, "uint32_t": ctypes.c_uint32,
        "int64_t": ctypes.c_int64, "uint64_t": ctypes.c_uint64,
        "size_t": ctypes.c_size_t, "float": ctypes.c_float, "double": ctypes.c_double,
    }

    def __init__(self, *paths: Path):
        self.text = "\n".join(strip_c_comments(p.read_text(errors="replace")) for p in paths)
        self.defines: dict[str, int] = {}
        for name, value in re.findall(r"#\s*define\s+(\w+)\s+(\d+)\b", self.text):
            self.defines.setdefault(name, int(value))

    def enum(self, name: str) -> dict[str, int]:
        """Member -> value of `enum NAME { ... }`."""
        match = re.search(r"enum\s+" + re.escape(name) + r"\s*\{(.*?)\}", self.text, re.S)
        if not match:
            raise DriverError(f"enum {name} not found in the GGML sources")
        members, value = {}, -1
        for item in match.group(1).split(","):
            item = item.strip()
            if not item:
                continue
            ident, _, expr = (part.strip() for part in item.partition("="))
            value = self._int_expr(expr) if expr else value + 1
            members[ident] = value
        return members

    def struct(self, name: str) -> type[ctypes.Structure]:
        """A ctypes.Structure with the fields of the flat `struct NAME { ... };`."""
        match = re.search(r"struct\s+" + re.escape(name) + r"\s*\{(.*?)\}\s*;", self.text, re.S)
        if not match:
            raise DriverError(f"struct {name} not found in the GGML sources")
        fields = []
        for decl in match.group(1).split(";"):
            decl = " ".join(decl.split())
            if not decl:
                continue
            parts = re.fullmatch(r"(.*?)\s*\b(\w+)\s*(?:\[(.*)\])?", decl)
            if not parts:
                raise DriverError(f"struct {name}: cannot read the declaration '{decl}'")
            ctype_text, field, dims = parts.groups()
            ctype = self._ctype(ctype_text, name)
            if dims is not None:
                ctype = ctype * self._int_expr(dims)
            fields.append((field, ctype))
        return type(name, (ctypes.Structure,), {"_fields_": fields})

    def _ctype(self, text: str, struct_name: str):
        if "*" in text:
            return ctypes.c_void_p
        words = text.replace("const ", "").split()
        if words and words[0] == "enum":
            return ctypes.c_int
        if len(words) == 1 and words[0] in self.C_SCALARS:
            return self.C_SCALARS[words[0]]
        raise DriverError(f"struct {struct_name}: unknown field type '{text}'")

    def _int_expr(self, expr: str) -> int:
        def sizeof(match):
            return str(ctypes.sizeof(self._ctype(match.group(1), "sizeof")))

        text = re.sub(r"sizeof\s*\(\s*([\w ]+?)\s*\)", sizeof, expr)
        text = re.sub(r"\b[A-Za-z_]\w*\b",
                      lambda m: str(self.defines.get(m.group(0), m.group(0))), text)
        if not re.fullmatch(r"[\d\s+\-*/()]+", text):
            raise DriverError(f"cannot evaluate the C constant expression '{expr}'")
        return int(eval(text.replace("/", "//"), {"__builtins__": {}}))  # digits and + - * / only


class GgmlInfo:
    """Layout, limits and enums of the GGML the libraries were built from."""

    def __init__(self, source_dir: Path):
        ggml_dir = source_dir / "ggml"
        header = CHeader(ggml_dir / "include" / "ggml.h", ggml_dir / "src" / "ggml.c")
        self.max_dims = header.defines["GGML_MAX_DIMS"]
        self.max_src = header.defines["GGML_MAX_SRC"]
        self.n_params = header.defines["GGML_MAX_OP_PARAMS"] // 4
        self.types = {k[len("GGML_TYPE_"):]: v for k, v in header.enum("ggml_type").items()}
        self.ops = {k[len("GGML_OP_"):]: v for k, v in header.enum("ggml_op").items()}
        self.unary = {k[len("GGML_UNARY_OP_"):]: v for k, v in header.enum("ggml_unary_op").items()}
        self.glu = {k[len("GGML_GLU_OP_"):]: v for k, v in header.enum("ggml_glu_op").items()}
        self.flags = {k[len("GGML_TENSOR_FLAG_"):]: v
                      for k, v in header.enum("ggml_tensor_flag").items()}
        self.rope_types = {k: v for k, v in header.defines.items() if k.startswith("GGML_ROPE_TYPE_")}
        self.tensor_struct = header.struct("ggml_tensor")
        self.object_struct = header.struct("ggml_object")
        self.type_count = self.types.pop("COUNT")
        self.op_count = self.ops.pop("COUNT")


# --------------------------------------------------------------------------------------------
# The libraries
# --------------------------------------------------------------------------------------------


class InitParams(ctypes.Structure):
    """struct ggml_init_params."""

    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p),
                ("no_alloc", ctypes.c_bool)]


class Ggml:
    """The GGML shared libraries with the prototypes the driver calls."""

    PROTOTYPES = {
        # name: (restype, argtypes)
        "ggml_init": (ctypes.c_void_p, [InitParams]),
        "ggml_free": (None, [ctypes.c_void_p]),
        "ggml_version": (ctypes.c_char_p, []),
        "ggml_commit": (ctypes.c_char_p, []),
        "ggml_tensor_overhead": (ctypes.c_size_t, []),
        "ggml_graph_overhead_custom": (ctypes.c_size_t, [ctypes.c_size_t, ctypes.c_bool]),
        "ggml_new_tensor": (ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                                              ctypes.POINTER(ctypes.c_int64)]),
        "ggml_new_tensor_1d": (ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_int, ctypes.c_int64]),
        "ggml_new_tensor_4d": (ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_int] +
                               [ctypes.c_int64] * 4),
        "ggml_view_4d": (ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_void_p] +
                         [ctypes.c_int64] * 4 + [ctypes.c_size_t] * 4),
        "ggml_scale": (ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_float]),
        "ggml_set_name": (ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_char_p]),
        "ggml_set_output": (None, [ctypes.c_void_p]),
        "ggml_get_data": (ctypes.c_void_p, [ctypes.c_void_p]),
        "ggml_nbytes": (ctypes.c_size_t, [ctypes.c_void_p]),
        "ggml_blck_size": (ctypes.c_int64, [ctypes.c_int]),
        "ggml_type_size": (ctypes.c_size_t, [ctypes.c_int]),
        "ggml_type_name": (ctypes.c_char_p, [ctypes.c_int]),
        "ggml_op_desc": (ctypes.c_char_p, [ctypes.c_void_p]),
        "ggml_new_graph_custom": (ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_size_t,
                                                    ctypes.c_bool]),
        "ggml_build_forward_expand": (None, [ctypes.c_void_p, ctypes.c_void_p]),
        "ggml_graph_n_nodes": (ctypes.c_int, [ctypes.c_void_p]),
        "ggml_graph_node": (ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_int]),
        "ggml_status_to_string": (ctypes.c_char_p, [ctypes.c_int]),
        "ggml_backend_name": (ctypes.c_char_p, [ctypes.c_void_p]),
        "ggml_backend_free": (None, [ctypes.c_void_p]),
        "ggml_backend_supports_op": (ctypes.c_bool, [ctypes.c_void_p, ctypes.c_void_p]),
        "ggml_backend_graph_compute": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p]),
        "ggml_backend_cpu_init": (ctypes.c_void_p, []),
        "ggml_backend_cpu_set_n_threads": (None, [ctypes.c_void_p, ctypes.c_int]),
        "ggml_backend_cpu_set_use_ref": (None, [ctypes.c_void_p, ctypes.c_bool]),
    }
    CPU_FEATURES = ("sse3", "ssse3", "avx", "avx_vnni", "avx2", "bmi2", "f16c", "fma",
                    "avx512", "avx512_vbmi", "avx512_vnni", "avx512_bf16", "amx_int8")

    def __init__(self, lib_dir: Path):
        mode = getattr(os, "RTLD_GLOBAL", 0) | getattr(os, "RTLD_NOW", 0)
        self.libs = [ctypes.CDLL(str(lib_dir / name), mode=mode)
                     for name in ("libggml-base.so", "libggml-cpu.so", "libggml.so")]
        for name, (restype, argtypes) in self.PROTOTYPES.items():
            fn = self._symbol(name)
            fn.restype, fn.argtypes = restype, argtypes
            setattr(self, name, fn)

    def _symbol(self, name: str):
        for lib in self.libs:
            try:
                return getattr(lib, name)
            except AttributeError:
                continue
        raise DriverError(f"symbol {name} not found in the GGML libraries")

    def cpu_features(self) -> str:
        """The ISA extensions the CPU backend was built with and found, comma separated."""
        found = []
        for feature in self.CPU_FEATURES:
            fn = self._symbol(f"ggml_cpu_has_{feature}")
            fn.restype, fn.argtypes = ctypes.c_int, []
            if fn():
                found.append(feature)
        return ",".join(found)

    def context(self, mem_size: int, no_alloc: bool) -> int:
        """A new ggml_context (caller frees it with ggml_free)."""
        ctx = self.ggml_init(InitParams(mem_size, None, no_alloc))
        if not ctx:
            raise DriverError(f"ggml_init failed for mem_size {mem_size}")
        return ctx


def f32_bits(value: float) -> int:
    """The bit pattern of an f32 as a signed int32 (how op_params store floats)."""
    return struct.unpack("<i", struct.pack("<f", value))[0]


def check_layout(g: Ggml, info: GgmlInfo) -> None:
    """Proves the struct ggml_tensor read from ggml.h matches the library, field by field."""
    T = info.tensor_struct
    problems = []

    def expect(what, got, want):
        if got != want:
            problems.append(f"{what}: got {got!r}, expected {want!r}")

    expect("ggml_tensor_overhead() = sizeof(ggml_object) + sizeof(ggml_tensor)",
           g.ggml_tensor_overhead(), ctypes.sizeof(info.object_struct) + ctypes.sizeof(T))
    f16 = info.types["F16"]
    ctx = g.context(64 * g.ggml_tensor_overhead(), no_alloc=True)
    try:
        p = g.ggml_new_tensor_4d(ctx, f16, 3, 5, 7, 11)
        t = T.from_address(p)
        expect("type", t.type, f16)
        expect("ne", list(t.ne), [3, 5, 7, 11])
        expect("nb", list(t.nb), [2, 6, 30, 210])
        expect("op", t.op, info.ops["NONE"])
        expect("data (no_alloc)", t.data, None)
        expect("ggml_nbytes", g.ggml_nbytes(p), 2 * 3 * 5 * 7 * 11)
        g.ggml_set_name(p, b"layout-probe")
        expect("name", t.name, b"layout-probe")
        s = T.from_address(g.ggml_scale(ctx, p, 2.5))
        expect("op of ggml_scale", s.op, info.ops["SCALE"])
        expect("op_params[0] of ggml_scale", s.op_params[0], f32_bits(2.5))
        expect("src[0] of ggml_scale", s.src[0], p)
        expect("src[1] of ggml_scale", s.src[1], None)
        vp = g.ggml_view_4d(ctx, p, 3, 5, 7, 10, 6, 30, 210, 210)
        v = T.from_address(vp)
        expect("op of ggml_view_4d", v.op, info.ops["VIEW"])
        expect("view_src", v.view_src, p)
        expect("view_offs", v.view_offs, 210)
        g.ggml_set_output(vp)
        expect("flags after ggml_set_output", v.flags & info.flags["OUTPUT"], info.flags["OUTPUT"])
    finally:
        g.ggml_free(ctx)
    ctx = g.context(4096, no_alloc=False)
    try:
        p = g.ggml_new_tensor_1d(ctx, info.types["F32"], 4)
        expect("data (allocating context)", T.from_address(p).data, g.ggml_get_data(p))
    finally:
        g.ggml_free(ctx)
    if problems:
        raise DriverError("struct ggml_tensor layout does not match the library: "
                          + "; ".join(problems))


# --------------------------------------------------------------------------------------------
# One case, in the worker
# --------------------------------------------------------------------------------------------


class HostMemory:
    """Zero-filled, DATA_ALIGNMENT-aligned bytes owned by Python."""

    def __init__(self, nbytes: int):
        self.raw = (ctypes.c_uint8 * (max(nbytes, 1) + DATA_ALIGNMENT))()
        base = ctypes.addressof(self.raw)
        self.address = (base + DATA_ALIGNMENT - 1) // DATA_ALIGNMENT * DATA_ALIGNMENT


def int_field(spec: dict, key: str, index: int, low: int, high: int) -> int:
    """spec[key] as an int in [low, high), else NotExpressible naming the tensor and field."""
    value = spec.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value < high:
        raise NotExpressible(f"tensor {index}: {key} = {value!r} is not an integer in [{low}, {high})")
    return value


def int_list(spec: dict, key: str, index: int, length: int, low: int, high: int) -> list[int]:
    """spec[key] as `length` ints in [low, high)."""
    values = spec.get(key)
    if (not isinstance(values, list) or len(values) != length or
            not all(isinstance(v, int) and not isinstance(v, bool) and low <= v < high
                    for v in values)):
        raise NotExpressible(
            f"tensor {index}: {key} = {values!r} is not {length} integers in [{low}, {high})")
    return values


class CaseRunner:
    """Builds and computes cases on one CPU backend."""

    def __init__(self, g: Ggml, info: GgmlInfo, threads: int, use_ref: bool):
        self.g, self.info = g, info
        self.backend = g.ggml_backend_cpu_init()
        if not self.backend:
            raise DriverError("ggml_backend_cpu_init failed")
        g.ggml_backend_cpu_set_n_threads(self.backend, threads)
        g.ggml_backend_cpu_set_use_ref(self.backend, use_ref)
        self.valid_types = {v for v in info.types.values() if g.ggml_blck_size(v) > 0}

    def run(self, case: dict) -> tuple[int, list[bytes], str]:
        """(status, output bytes, note) of one case."""
        try:
            return self._run(case)
        except NotExpressible as err:
            return STATUS_NOT_RUN, [], str(err)
        except Exception as err:  # a driver bug must not be mistaken for GGML's answer
            return STATUS_NOT_RUN, [], f"driver error: {type(err).__name__}: {err}"

    def _run(self, case: dict) -> tuple[int, list[bytes], str]:
        g, info, T = self.g, self.info, self.info.tensor_struct
        specs, outputs = case.get("tensors"), case.get("outputs")
        if not isinstance(specs, list) or not specs:
            raise NotExpressible("'tensors' is not a non-empty list")
        if (not isinstance(outputs, list) or not outputs or
                not all(isinstance(o, int) and not isinstance(o, bool) and 0 <= o < len(specs)
                        for o in outputs)):
            raise NotExpressible(f"'outputs' = {outputs!r} is not a list of tensor indices")
        custom = {info.ops[k] for k in ("MAP_CUSTOM1", "MAP_CUSTOM2", "MAP_CUSTOM3", "CUSTOM")}
        for i, spec in enumerate(specs):
            if isinstance(spec, dict) and spec.get("op") in custom:
                # Their op_params hold a C function pointer; an export cannot carry one.
                raise NotExpressible(f"tensor {i} is a custom op (a function pointer in op_params)")
        graph_size = max(2048, 2 * len(specs))
        ctx = g.context((len(specs) + 8) * g.ggml_tensor_overhead() +
                        g.ggml_graph_overhead_custom(graph_size, False) + 4096, no_alloc=True)
        memory = []  # keeps every tensor's bytes alive until the context is freed
        try:
            ptrs, sizes = [], []
            one = (ctypes.c_int64 * 1)(1)
            for i, spec in enumerate(specs):
                if not isinstance(spec, dict):
                    raise NotExpressible(f"tensor {i} is not an object")
                p = g.ggml_new_tensor(ctx, info.types["F32"], 1, one)
                if not p:
                    raise DriverError(f"ggml_new_tensor failed for tensor {i}")
                t = T.from_address(p)
                self._set_fields(t, spec, i, ptrs + [p])
                g.ggml_set_name(p, f"t{i}".encode())
                nbytes = g.ggml_nbytes(p)
                self._set_data(t, spec, i, nbytes, specs, ptrs, sizes, memory)
                ptrs.append(p)
                sizes.append(nbytes)
            graph = g.ggml_new_graph_custom(ctx, graph_size, False)
            for o in outputs:
                # As ggml_set_output: the CPU backend then never fuses an output away.
                T.from_address(ptrs[o]).flags |= info.flags["OUTPUT"]
                g.ggml_build_forward_expand(graph, ptrs[o])
            index_of = {p: i for i, p in enumerate(ptrs)}
            for n in range(g.ggml_graph_n_nodes(graph)):
                node = g.ggml_graph_node(graph, n)
                if not g.ggml_backend_supports_op(self.backend, node):
                    return STATUS_REFUSED, [], (
                        f"the CPU backend does not support {self._describe(node, index_of)}")
            status = g.ggml_backend_graph_compute(self.backend, graph)
            if status != 0:
                return STATUS_REFUSED, [], (
                    f"ggml_backend_graph_compute returned {status} "
                    f"({g.ggml_status_to_string(status).decode()})")
            return STATUS_COMPUTED, [
                ctypes.string_at(T.from_address(ptrs[o]).data, sizes[o]) for o in outputs], ""
        finally:
            g.ggml_free(ctx)

    def _set_fields(self, t, spec: dict, i: int, ptrs: list[int]) -> None:
        """Writes the spec's fields into t; ptrs holds the tensors 0..i (i is t itself)."""
        info = self.info
        t.type = int_field(spec, "type", i, 0, info.type_count)
        if t.type not in self.valid_types:
            raise NotExpressible(f"tensor {i}: type {t.type} is not a GGML type in this version")
        t.ne[:] = int_list(spec, "ne", i, info.max_dims, 0, 2**63)
        t.nb[:] = int_list(spec, "nb", i, info.max_dims, 0, 2**63)
        t.op = int_field(spec, "op", i, 0, info.op_count)
        # int32 as the format says; unsigned spellings of the same bits are accepted too.
        params = int_list(spec, "params", i, info.n_params, -2**31, 2**32)
        t.op_params[:] = [v - 2**32 if v >= 2**31 else v for v in params]
        t.flags = int_field(spec, "flags", i, -2**31, 2**31)
        srcs = spec.get("src")
        if not isinstance(srcs, list) or len(srcs) > info.max_src:
            raise NotExpressible(f"tensor {i}: src = {srcs!r} is not a list of at most "
                                 f"{info.max_src} entries")
        for k, s in enumerate(srcs):
            if s is None:
                continue
            # s == i is the self-reference ggml_cast writes into src[1].
            if not isinstance(s, int) or isinstance(s, bool) or not 0 <= s <= i:
                raise NotExpressible(f"tensor {i}: src[{k}] = {s!r} is not an earlier tensor "
                                     f"or the tensor itself")
            t.src[k] = ptrs[s]

    def _set_data(self, t, spec, i, nbytes, specs, ptrs, sizes, memory) -> None:
        view_src, data = spec.get("view_src"), spec.get("data")
        if view_src is not None:
            if not isinstance(view_src, int) or isinstance(view_src, bool) or not 0 <= view_src < i:
                raise NotExpressible(f"tensor {i}: view_src = {view_src!r} is not an earlier tensor")
            if specs[view_src].get("view_src") is not None:
                raise NotExpressible(f"tensor {i}: view_src {view_src} is itself a view")
            offs = int_field(spec, "view_offs", i, 0, 2**63)
            if offs + nbytes > sizes[view_src]:
                raise NotExpressible(
                    f"tensor {i}: view_offs {offs} + ggml_nbytes {nbytes} exceeds the "
                    f"{sizes[view_src]} bytes of tensor {view_src}")
            if data is not None:
                raise NotExpressible(f"tensor {i}: a view has no data of its own")
            root = self.info.tensor_struct.from_address(ptrs[view_src])
            t.view_src, t.view_offs, t.data = ptrs[view_src], offs, root.data + offs
            return
        if spec.get("view_offs", 0) != 0:
            raise NotExpressible(f"tensor {i}: view_offs without view_src")
        mem = HostMemory(nbytes)
        memory.append(mem)
        t.data = mem.address
        is_leaf = t.op == self.info.ops["NONE"]
        if is_leaf != (data is not None):
            raise NotExpressible(f"tensor {i}: data must be given exactly for leaves "
                                 f"(op NONE without view_src)")
        if is_leaf:
            try:
                raw = base64.b64decode(data, validate=True)
            except (TypeError, ValueError) as err:
                raise NotExpressible(f"tensor {i}: data is not base64 ({err})") from err
            if len(raw) != nbytes:
                raise NotExpressible(
                    f"tensor {i}: data has {len(raw)} bytes, ggml_nbytes is {nbytes}")
            ctypes.memmove(mem.address, raw, nbytes)

    def _describe(self, node: int, index_of: dict[int, int]) -> str:
        g, T = self.g, self.info.tensor_struct
        t = T.from_address(node)

        def type_name(tensor) -> str:
            return g.ggml_type_name(tensor.type).decode()

        srcs = [f"t{index_of.get(s, '?')}:{type_name(T.from_address(s))}"
                for s in t.src if s]
        return (f"{g.ggml_op_desc(node).decode()} -> t{index_of.get(node, '?')}:"
                f"{type_name(t)} from [{', '.join(srcs)}]")


def write_record(stream, index: int, status: int, outputs: list[bytes], note: str) -> None:
    """One worker -> driver record."""
    parts = [struct.pack("<IBI", index, status, len(outputs))]
    for out in outputs:
        parts += [struct.pack("<Q", len(out)), out]
    note_bytes = note.encode()
    parts += [struct.pack("<I", len(note_bytes)), note_bytes]
    stream.write(b"".join(parts))
    stream.flush()


def worker_main(args) -> int:
    """The worker: runs cases from --start on and streams their results to the driver."""
    # Results go over the original stdout; anything GGML prints lands on stderr.
    channel = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    lib_dir = Path(args.lib_dir)
    info = GgmlInfo(Path(args.source_dir))
    g = Ggml(lib_dir)
    check_layout(g, info)
    runner = CaseRunner(g, info, args.threads, args.use_ref)
    meta = {
        "ggml_version": g.ggml_version().decode(),
        "ggml_commit": g.ggml_commit().decode(),
        "backend": g.ggml_backend_name(runner.backend).decode(),
        "cpu_features": g.cpu_features(),
    }
    write_record(channel, READY_INDEX, STATUS_COMPUTED, [], json.dumps(meta))
    with open(args.worker, encoding="utf-8") as export:
        for index, line in enumerate(export):
            if index < args.start or not line.strip():
                continue
            sys.stderr.write(f"{CASE_MARKER}{index}\n")
            sys.stderr.flush()
            status, outputs, note = runner.run(json.loads(line))
            write_record(channel, index, status, outputs, note)
    g.ggml_backend_free(runner.backend)
    return 0


# --------------------------------------------------------------------------------------------
# The driver
# --------------------------------------------------------------------------------------------


class WorkerDied(Exception):
    """The worker exited or closed its channel."""


class WorkerTimeout(Exception):
    """The worker sent nothing within the time limit."""


class Worker:
    """A worker process and the reading end of its result channel."""

    def __init__(self, argv: list[str]):
        self.stderr = tempfile.TemporaryFile()
        env = dict(os.environ, GGML_NO_BACKTRACE="1")
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=self.stderr, env=env)
        os.set_blocking(self.proc.stdout.fileno(), False)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.proc.stdout, selectors.EVENT_READ)
        self.buffer = bytearray()

    def _read(self, n: int, deadline: float) -> bytes:
        while len(self.buffer) < n:
            left = deadline - time.monotonic()
            if left <= 0 or not self.selector.select(left):
                raise WorkerTimeout()
            chunk = os.read(self.proc.stdout.fileno(), 1 << 20)
            if not chunk:
                raise WorkerDied()
            self.buffer += chunk
        out = bytes(self.buffer[:n])
        del self.buffer[:n]
        return out

    def record(self, timeout: float) -> tuple[int, int, list[bytes], str]:
        """The next (index, status, outputs, note); WorkerDied or WorkerTimeout otherwise."""
        deadline = time.monotonic() + timeout
        index, status, n_out = struct.unpack("<IBI", self._read(9, deadline))
        outputs = []
        for _ in range(n_out):
            (length,) = struct.unpack("<Q", self._read(8, deadline))
            outputs.append(self._read(length, deadline))
        (note_len,) = struct.unpack("<I", self._read(4, deadline))
        return index, status, outputs, self._read(note_len, deadline).decode(errors="replace")

    def stop(self, grace: float) -> str:
        """Ends the worker (killed after `grace` seconds); returns how it ended."""
        try:
            code = self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.selector.close()
        self.proc.stdout.close()
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit status {code}"

    def stderr_since(self, marker: str | None) -> str:
        """What the worker printed to stderr after `marker` (all of it when None)."""
        self.stderr.seek(0)
        text = self.stderr.read().decode(errors="replace")
        if marker is not None:
            at = text.rfind(marker)
            text = text[at + len(marker):] if at >= 0 else ""
        return text

    def close(self) -> None:
        """Releases the stderr file."""
        self.stderr.close()


def short(text: str, limit: int = 400) -> str:
    """The last lines of `text`, at most `limit` characters, on one line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    joined = " | ".join(lines)
    return joined if len(joined) <= limit else "..." + joined[-limit:]


def read_export(path: Path) -> list[tuple[str, int]]:
    """(name, hash) of every case of the export, in order, checking names and hashes."""
    cases, seen = [], set()
    with open(path, encoding="utf-8") as export:
        for line_no, line in enumerate(export, 1):
            if not line.strip():
                continue
            try:
                case = json.loads(line)
            except json.JSONDecodeError as err:
                raise DriverError(f"{path}:{line_no}: not JSON ({err})") from err
            if not isinstance(case, dict):
                raise DriverError(f"{path}:{line_no}: not a JSON object")
            name, hash_hex = case.get("name"), case.get("hash")
            if not isinstance(name, str) or not name:
                raise DriverError(f"{path}:{line_no}: 'name' = {name!r} is not a string")
            if name in seen:
                raise DriverError(f"{path}:{line_no}: case name {name!r} appears twice")
            if not isinstance(hash_hex, str) or not re.fullmatch(r"[0-9a-f]{16}", hash_hex):
                raise DriverError(f"{path}:{line_no}: 'hash' = {hash_hex!r} is not 16 lower-case "
                                  f"hex digits")
            seen.add(name)
            cases.append((name, int(hash_hex, 16)))
    return cases


def run_export(export: Path, out: Path, lib_dir: Path, source_dir: Path, threads: int,
               timeout: float, use_ref: bool, quiet: bool = False) -> tuple[int, int, int]:
    """Runs every case of `export`, writes the fixture `out`; returns the three counts."""
    cases = read_export(export)
    # Blank lines are skipped by both sides; the worker numbers lines, so map them.
    line_index = [i for i, line in enumerate(open(export, encoding="utf-8")) if line.strip()]
    results: list[tuple[int, list[bytes], str]] = []
    meta: dict[str, str] = {}

    def report(k: int, status: int, note: str) -> None:
        if not quiet:
            tail = f"  ({note})" if note else ""
            print(f"{STATUS_WORDS[status]:8}  {cases[k][0]}{tail}", flush=True)

    while len(results) < len(cases):
        k = len(results)
        argv = [sys.executable, str(Path(__file__).resolve()), "--worker", str(export),
                "--start", str(line_index[k]), "--lib-dir", str(lib_dir),
                "--source-dir", str(source_dir), "--threads", str(threads)]
        worker = Worker(argv + (["--use-ref"] if use_ref else []))
        try:
            try:
                index, _, _, ready = worker.record(timeout=120)
                if index != READY_INDEX:
                    raise WorkerDied()
            except (WorkerDied, WorkerTimeout) as err:
                how = worker.stop(grace=0 if isinstance(err, WorkerTimeout) else 10)
                raise DriverError(f"the worker did not start ({how}): "
                                  f"{short(worker.stderr_since(None), 2000)}") from None
            meta = json.loads(ready)
            while len(results) < len(cases):
                k = len(results)
                try:
                    index, status, outputs, note = worker.record(timeout)
                except (WorkerDied, WorkerTimeout) as err:
                    what = (f"timed out after {timeout:g} s" if isinstance(err, WorkerTimeout)
                            else "GGML ended the process")
                    how = worker.stop(grace=0 if isinstance(err, WorkerTimeout) else 10)
                    printed = short(worker.stderr_since(f"{CASE_MARKER}{line_index[k]}\n"))
                    note = f"{what} ({how})" + (f": {printed}" if printed else "")
                    results.append((STATUS_REFUSED, [], note))
                    report(k, STATUS_REFUSED, note)
                    break
                if index != line_index[k]:
                    raise DriverError(f"worker answered case line {index}, expected {line_index[k]}")
                results.append((status, outputs, note))
                report(k, status, note)
            else:
                worker.stop(grace=10)
        finally:
            worker.close()

    meta_pairs = [("ggml", package_id(source_dir)), ("cpu", cpu_model()),
                  ("threads", str(threads)), ("use_ref", "1" if use_ref else "0")]
    meta_pairs += [(key, meta.get(key, "")) for key in
                   ("ggml_version", "ggml_commit", "backend", "cpu_features")]
    write_fixture(out, meta_pairs, [(name, h, *res) for (name, h), res in zip(cases, results)])
    counts = tuple(sum(1 for r in results if r[0] == s)
                   for s in (STATUS_COMPUTED, STATUS_REFUSED, STATUS_NOT_RUN))
    if not quiet:
        print(f"{counts[0]} computed, {counts[1]} refused, {counts[2]} not run")
    return counts


def write_fixture(path: Path, meta: list[tuple[str, str]], cases: list[tuple]) -> None:
    """Writes a fixture file (FORMAT.md section 2) atomically."""

    def text(value: str) -> bytes:
        raw = value.encode()
        return struct.pack("<I", len(raw)) + raw

    parts = [FIXTURE_MAGIC, struct.pack("<II", FIXTURE_VERSION, len(meta))]
    for key, value in meta:
        parts += [text(key), text(value)]
    parts.append(struct.pack("<I", len(cases)))
    for name, hash_value, status, outputs, note in cases:
        parts += [text(name), struct.pack("<QBI", hash_value, status, len(outputs))]
        for out in outputs:
            parts += [struct.pack("<Q", len(out)), out]
        parts.append(text(note))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(b"".join(parts))
    os.replace(tmp, path)


def read_fixture(path: Path) -> tuple[dict[str, str], list[dict]]:
    """(meta, cases) of a fixture file; each case a dict name/hash/status/outputs/note."""
    data = Path(path).read_bytes()
    pos = 0

    def take(n: int) -> bytes:
        nonlocal pos
        if pos + n > len(data):
            raise DriverError(f"{path}: truncated at byte {pos}")
        pos += n
        return data[pos - n:pos]

    def u(fmt: str) -> int:
        return struct.unpack("<" + fmt, take(struct.calcsize(fmt)))[0]

    def text() -> str:
        return take(u("I")).decode()

    if take(8) != FIXTURE_MAGIC or u("I") != FIXTURE_VERSION:
        raise DriverError(f"{path}: not a version {FIXTURE_VERSION} GGML op fixture")
    meta = {}
    for _ in range(u("I")):
        key = text()
        meta[key] = text()
    cases = []
    for _ in range(u("I")):
        case = {"name": text(), "hash": u("Q"), "status": u("B")}
        case["outputs"] = [take(u("Q")) for _ in range(u("I"))]
        case["note"] = text()
        cases.append(case)
    if pos != len(data):
        raise DriverError(f"{path}: {len(data) - pos} bytes after the last case")
    return meta, cases


def dump_fixture(path: Path) -> None:
    """Prints a fixture's meta data and one line per case."""
    meta, cases = read_fixture(path)
    for key, value in meta.items():
        print(f"{key}: {value}")
    for case in cases:
        sizes = ",".join(str(len(o)) for o in case["outputs"])
        note = f"  ({case['note']})" if case["note"] else ""
        print(f"{STATUS_WORDS.get(case['status'], case['status']):8}  {case['hash']:016x}  "
              f"[{sizes}]  {case['name']}{note}")


# --------------------------------------------------------------------------------------------
# Self-test
# --------------------------------------------------------------------------------------------


def pack(fmt: str, values) -> bytes:
    """Little-endian packing of a flat list."""
    values = list(values)
    return struct.pack(f"<{len(values)}{fmt}", *values)


def unpack(fmt: str, raw: bytes) -> list:
    """Little-endian unpacking of a whole buffer."""
    return list(struct.unpack(f"<{len(raw) // struct.calcsize(fmt)}{fmt}", raw))


def to_f32(x: float) -> float:
    """x rounded to the nearest f32."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def contiguous_nb(elem_size: int, ne: list[int]) -> list[int]:
    """Byte strides of a contiguous tensor of a 1-element-per-block type."""
    nb = [elem_size]
    for n in ne[:-1]:
        nb.append(nb[-1] * n)
    return nb


class SelfTest:
    """A small export with hand-computed expectations (see main's --selftest)."""

    TYPE_SIZE = {"F32": 4, "F16": 2, "I32": 4}
    FMT = {"F32": "f", "F16": "e", "I32": "i"}

    def __init__(self, info: GgmlInfo):
        self.info = info
        self.cases: list[dict] = []
        self.checks: list = []  # per case: (status, check function or None)
        self.seed = 12345

    def values(self, n: int, lo: float = -1.0, hi: float = 1.0) -> list[float]:
        """n reproducible pseudo-random f32 values in [lo, hi)."""
        out = []
        for _ in range(n):
            self.seed = (self.seed * 1103515245 + 12345) % 2**31
            out.append(to_f32(lo + (hi - lo) * self.seed / 2**31))
        return out

    def tensor(self, ts: list, type_name: str, ne: list[int], op: str = "NONE", src=(),
               params=(), data=None, view_src=None, view_offs=0, nb=None) -> int:
        """Appends a tensor spec; returns its index."""
        p = list(params) + [0] * (self.info.n_params - len(params))
        ts.append({
            "type": self.info.types[type_name], "ne": ne,
            "nb": nb or contiguous_nb(self.TYPE_SIZE[type_name], ne),
            "op": self.info.ops[op], "params": p, "flags": 0, "src": list(src),
            "view_src": view_src, "view_offs": view_offs,
            "data": None if data is None else base64.b64encode(
                pack(self.FMT[type_name], data)).decode(),
        })
        return len(ts) - 1

    def add_case(self, name: str, ts: list, outputs: list[int], status: int, check) -> None:
        self.cases.append({"name": name, "hash": f"{len(self.cases) + 1:016x}",
                           "tensors": ts, "outputs": outputs})
        self.checks.append((status, check))

    def build(self) -> None:
        """The cases: ADD broadcast, MUL_MAT, SOFT_MAX, VIEW+CONT, CPY, ROPE NEOX, GET_ROWS,
        plus one GGML aborts on and one the driver cannot express."""
        self.case_add()
        self.case_mul_mat()
        self.case_soft_max()
        self.case_view_cont()
        self.case_cpy_f16()
        self.case_rope_neox()
        self.case_aborting()
        self.case_get_rows()
        self.case_inexpressible()

    def case_add(self) -> None:
        ne_a, ne_b = [10, 5, 4, 3], [10, 1, 4, 1]
        a, b = self.values(math.prod(ne_a)), self.values(math.prod(ne_b))
        ts = []
        ia = self.tensor(ts, "F32", ne_a, data=a)
        ib = self.tensor(ts, "F32", ne_b, data=b)
        io = self.tensor(ts, "F32", ne_a, "ADD", src=[ia, ib])
        want = []
        for i3 in range(3):
            for i2 in range(4):
                for i1 in range(5):
                    for i0 in range(10):
                        want.append(to_f32(a[((i3 * 4 + i2) * 5 + i1) * 10 + i0] +
                                           b[i2 * 10 + i0]))
        self.add_case("ADD(broadcast b=[10,1,4,1])", ts, [io], STATUS_COMPUTED,
                      lambda outs: compare(unpack("f", outs[0]), want, 0.0))

    def case_mul_mat(self) -> None:
        k, m, n = 16, 6, 5
        ne_a, ne_b = [k, m, 2, 1], [k, n, 4, 3]
        a, b = self.values(math.prod(ne_a)), self.values(math.prod(ne_b))
        ts = []
        ia = self.tensor(ts, "F32", ne_a, data=a)
        ib = self.tensor(ts, "F32", ne_b, data=b)
        io = self.tensor(ts, "F32", [m, n, 4, 3], "MUL_MAT", src=[ia, ib])
        want = []
        for i3 in range(3):
            for i2 in range(4):
                a2 = i2 // 2  # src0 broadcast over dim 2 (2 -> 4); dim 3 (1 -> 3)
                for j in range(n):
                    for i in range(m):
                        want.append(sum(a[(a2 * m + i) * k + x] * b[((i3 * 4 + i2) * n + j) * k + x]
                                        for x in range(k)))
        self.add_case("MUL_MAT(f32, broadcast)", ts, [io], STATUS_COMPUTED,
                      lambda outs: compare(unpack("f", outs[0]), want, 1e-5))

    def case_soft_max(self) -> None:
        ne, scale = [8, 3, 2, 1], 0.375
        a = self.values(math.prod(ne), -4.0, 4.0)
        ts = []
        ia = self.tensor(ts, "F32", ne, data=a)
        io = self.tensor(ts, "F32", ne, "SOFT_MAX", src=[ia], params=[f32_bits(scale), 0])
        want = []
        for r in range(len(a) // ne[0]):
            row = [scale * x for x in a[r * ne[0]:(r + 1) * ne[0]]]
            top = max(row)
            e = [math.exp(x - top) for x in row]
            want += [x / sum(e) for x in e]
        self.add_case("SOFT_MAX(scale=0.375)", ts, [io], STATUS_COMPUTED,
                      lambda outs: compare(unpack("f", outs[0]), want, 1e-6))

    def case_view_cont(self) -> None:
        ne_root = [6, 4, 3, 1]
        root = self.values(math.prod(ne_root))
        # The root is contiguous: strides 4, 24, 96, 288.
        # Every other row, starting at element (1, 1, 0): 3 x 2 x 3, strides 4, 48, 96.
        ne_v, nb_v, offs = [3, 2, 3, 1], [4, 48, 96, 288], 1 * 4 + 1 * 24
        ts = []
        ir = self.tensor(ts, "F32", ne_root, data=root)
        # GGML keeps a view's byte offset in op_params[0..1] (a size_t).
        iv = self.tensor(ts, "F32", ne_v, "VIEW", src=[ir], params=[offs, 0], view_src=ir,
                         view_offs=offs, nb=nb_v)
        io = self.tensor(ts, "F32", ne_v, "CONT", src=[iv])
        want = []
        for i2 in range(3):
            for i1 in range(2):
                for i0 in range(3):
                    want.append(root[(offs + i0 * nb_v[0] + i1 * nb_v[1] + i2 * nb_v[2]) // 4])
        # The view itself comes back as ggml_nbytes (4 + 2*4 + 1*48 + 2*96) from its start.
        view_bytes = pack("f", root)[offs:offs + 252]
        self.add_case("CONT(VIEW(offs=28, nb1=48))", ts, [io, iv], STATUS_COMPUTED,
                      lambda outs: compare(unpack("f", outs[0]), want, 0.0) or
                      (None if outs[1] == view_bytes else
                       f"the view's {len(outs[1])} bytes differ from the root's"))

    def case_cpy_f16(self) -> None:
        ne = [7, 3, 1, 1]
        a = self.values(math.prod(ne), -3.0, 3.0)
        a[:6] = [to_f32(1 / 3), 65504.0, 1e-6, -2.5, 0.0, to_f32(1 + 2**-11)]  # rounding cases
        ts = []
        ia = self.tensor(ts, "F32", ne, data=a)
        ib = self.tensor(ts, "F16", ne, data=[0.0] * math.prod(ne))
        # ggml_cpy's result is a view of its destination with op CPY.
        io = self.tensor(ts, "F16", ne, "CPY", src=[ia, ib], view_src=ib)
        # ggml_cast's result is a new tensor with op CPY whose src[1] is itself.
        ic = self.tensor(ts, "F16", ne, "CPY", src=[ia, len(ts)])
        want = pack("e", a)  # Python's half packing rounds to nearest even, as F16C does
        self.add_case("CPY(f32 -> f16, as ggml_cpy and as ggml_cast)", ts, [io, ib, ic],
                      STATUS_COMPUTED,
                      lambda outs: None if outs == [want] * 3 else
                      "f16 bytes differ: " + " / ".join(o.hex() for o in outs) +
                      f" vs {want.hex()}")

    def rope_case(self, ts: list, ne: list[int], pos: list[int], n_dims: int, mode: int,
                  freq_base: float, freq_scale: float, attn_factor: float, n_offs: int) -> int:
        ia = self.tensor(ts, "F32", ne, data=self.values(math.prod(ne)))
        ip = self.tensor(ts, "I32", [len(pos), 1, 1, 1], data=pos)
        params = [0, n_dims, mode, 0, 0, f32_bits(freq_base), f32_bits(freq_scale),
                  f32_bits(0.0), f32_bits(attn_factor), f32_bits(32.0), f32_bits(1.0),
                  0, 0, 0, 0, n_offs]
        return self.tensor(ts, "F32", ne, "ROPE", src=[ia, ip], params=params)

    def case_rope_neox(self) -> None:
        ne, pos, n_dims = [10, 2, 3, 1], [0, 5, 11], 6
        base, fscale, attn = 10000.0, 0.5, 1.25
        ts = []
        io = self.rope_case(ts, ne, pos, n_dims, self.info.rope_types["GGML_ROPE_TYPE_NEOX"],
                            base, fscale, attn, 0)
        x = unpack("f", base64.b64decode(ts[0]["data"]))
        want, half = [], n_dims // 2
        for i2, p in enumerate(pos):
            for i1 in range(ne[1]):
                row = x[(i2 * ne[1] + i1) * ne[0]:(i2 * ne[1] + i1 + 1) * ne[0]]
                out = list(row)
                for j in range(half):
                    theta = fscale * p * base ** (-2.0 * j / n_dims)
                    c, s = math.cos(theta) * attn, math.sin(theta) * attn
                    out[j] = row[j] * c - row[j + half] * s
                    out[j + half] = row[j] * s + row[j + half] * c
                want += out
        self.add_case("ROPE(neox, n_dims=6 of 10, freq_scale=0.5, attn_factor=1.25)", ts, [io],
                      STATUS_COMPUTED, lambda outs: compare(unpack("f", outs[0]), want, 1e-5))

    def case_aborting(self) -> None:
        # GGML asserts n_offs % 2 == 0 while computing ROPE: the process aborts.
        ts = []
        io = self.rope_case(ts, [8, 1, 2, 1], [1, 2], 4,
                            self.info.rope_types["GGML_ROPE_TYPE_NEOX"], 10000.0, 1.0, 1.0, 1)
        self.add_case("ROPE(n_offs=1, GGML aborts)", ts, [io], STATUS_REFUSED,
                      lambda note: None if "n_offs % 2 == 0" in note else f"note: {note}")

    def case_get_rows(self) -> None:
        ne_a, ne_i = [5, 6, 2, 1], [4, 2, 1, 1]
        a = [to_f32(float(struct.unpack("<e", struct.pack("<e", v))[0]))
             for v in self.values(math.prod(ne_a), -8.0, 8.0)]
        rows = [5, 0, 3, 3, 1, 4, 2, 5]
        ts = []
        ia = self.tensor(ts, "F16", ne_a, data=a)
        ii = self.tensor(ts, "I32", ne_i, data=rows)
        io = self.tensor(ts, "F32", [5, 4, 2, 1], "GET_ROWS", src=[ia, ii])
        want = []
        for i2 in range(2):
            for i1 in range(4):
                r = rows[i2 * 4 + i1]
                want += a[(i2 * 6 + r) * 5:(i2 * 6 + r + 1) * 5]
        self.add_case("GET_ROWS(f16 -> f32)", ts, [io], STATUS_COMPUTED,
                      lambda outs: compare(unpack("f", outs[0]), want, 0.0))

    def case_inexpressible(self) -> None:
        ts = []
        ia = self.tensor(ts, "F32", [4, 1, 1, 1], data=[1.0, 2.0, 3.0, 4.0])
        self.tensor(ts, "F32", [4, 1, 1, 1], "SQR", src=[ia + 5])
        self.add_case("SQR(src out of range)", ts, [1], STATUS_NOT_RUN,
                      lambda note: None if "src[0]" in note else f"note: {note}")


def compare(got: list[float], want: list[float], tol: float) -> str | None:
    """None when |got - want| <= tol * max(1, |want|) everywhere, else the first difference."""
    if len(got) != len(want):
        return f"{len(got)} values, expected {len(want)}"
    for i, (x, y) in enumerate(zip(got, want)):
        if not abs(x - y) <= tol * max(1.0, abs(y)):
            return f"element {i}: got {x!r}, expected {y!r} (tolerance {tol})"
    return None


def selftest(lib_dir: Path, source_dir: Path, threads: int, timeout: float) -> int:
    """Runs the self-test export through the whole driver; 0 when every check passes."""
    info = GgmlInfo(source_dir)
    test = SelfTest(info)
    test.build()
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        export, out = Path(tmp) / "selftest.jsonl", Path(tmp) / "selftest.bin"
        export.write_text("".join(json.dumps(c) + "\n" for c in test.cases))
        run_export(export, out, lib_dir, source_dir, threads, timeout, use_ref=False)
        meta, cases = read_fixture(out)
        print("fixture meta: " + ", ".join(f"{k}={v}" for k, v in meta.items()))
        for spec, (want_status, check), got in zip(test.cases, test.checks, cases):
            problem = None
            if got["name"] != spec["name"] or got["hash"] != int(spec["hash"], 16):
                problem = "name or hash not copied"
            elif got["status"] != want_status:
                problem = f"status {got['status']}, expected {want_status} ({got['note']})"
            elif want_status == STATUS_COMPUTED:
                problem = check(got["outputs"])
            else:
                problem = check(got["note"])
            failures += problem is not None
            print(f"{'PASS' if problem is None else 'FAIL'}  {spec['name']}"
                  + (f": {problem}" if problem else ""))
    print("self-test " + ("passed" if failures == 0 else f"FAILED ({failures} checks)"))
    return 0 if failures == 0 else 1


# --------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("export", nargs="?", help="case export (JSON Lines, FORMAT.md)")
    parser.add_argument("--out", help="fixture file to write")
    parser.add_argument("--threads", type=int, default=1, help="CPU backend threads (1)")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds one case may take before it counts as refused (120)")
    parser.add_argument("--use-ref", action="store_true",
                        help="use the CPU backend's reference kernels (no fusion, no SIMD paths)")
    parser.add_argument("--lib-dir", help="directory with libggml*.so (default: build.sh)")
    parser.add_argument("--source-dir", help="llama.cpp source tree (default: from the build)")
    parser.add_argument("--selftest", action="store_true", help="run the built-in self-test")
    parser.add_argument("--dump", metavar="FIXTURE", help="print a fixture file's contents")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    try:
        if args.worker:
            return worker_main(args)
        if args.dump:
            dump_fixture(Path(args.dump))
            return 0
        if args.threads < 1:
            raise DriverError(f"--threads {args.threads}: must be at least 1")
        if args.timeout <= 0:
            raise DriverError(f"--timeout {args.timeout}: must be positive")
        lib_dir = find_lib_dir(args.lib_dir)
        source_dir = find_source_dir(lib_dir, args.source_dir)
        if args.selftest:
            return selftest(lib_dir, source_dir, args.threads, args.timeout)
        if not args.export or not args.out:
            raise DriverError("give an EXPORT file and --out FIXTURE (or --selftest / --dump)")
        run_export(Path(args.export), Path(args.out), lib_dir, source_dir, args.threads,
                   args.timeout, args.use_ref)
        return 0
    except DriverError as err:
        print(f"run_ggml.py: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
