//! A hostile client against our server: each known attack class on GGML's `rpc-server` (and
//! more) sent over a socket. Each must get an error (a closed connection: the protocol has no
//! error replies) or a harmless answer, never touch bytes outside its buffer, and leave the
//! server serving a good client afterwards.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{assert_close, cpu_reference, Mixed};
use ggml::{backend, DeviceType, Op, Type};
use ggml_rpc::proto::{self, Cmd, GraphMsg, Request, WireTensor};
use ggml_rpc::Server;

/// A raw connection that has said HELLO and holds one 1024-byte buffer.
struct Raw {
    s: TcpStream,
    handle: u64,
    base: u64,
}

const BUF: u64 = 1024;

impl Raw {
    fn connect(ep: &str) -> Raw {
        let s = TcpStream::connect(ep).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut r = Raw {
            s,
            handle: 0,
            base: 0,
        };
        r.hello();
        let v = r
            .call(&Request::AllocBuffer {
                device: 0,
                size: BUF,
            })
            .unwrap();
        r.handle = u64::from_le_bytes(v[..8].try_into().unwrap());
        assert_ne!(r.handle, 0);
        let v = r
            .call(&Request::BufferGetBase {
                remote_ptr: r.handle,
            })
            .unwrap();
        r.base = u64::from_le_bytes(v.try_into().unwrap());
        r
    }

    fn hello(&mut self) {
        let v = self.call(&Request::Hello { caps: [0; 24] }).unwrap();
        assert_eq!(proto::check_hello(&v).unwrap(), (7, 0, 0));
    }

    fn send_raw(&mut self, bytes: &[u8]) {
        // The server may close while we write: that is an answer too.
        let _ = self.s.write_all(bytes);
    }

    fn send(&mut self, req: &Request) {
        let mut v = vec![req.cmd() as u8];
        let p = req.encode_payload();
        v.extend_from_slice(&(p.len() as u64).to_le_bytes());
        v.extend_from_slice(&p);
        self.send_raw(&v);
    }

    fn read_response(&mut self) -> Option<Vec<u8>> {
        let mut len = [0u8; 8];
        self.s.read_exact(&mut len).ok()?;
        let mut v = vec![0u8; u64::from_le_bytes(len) as usize];
        self.s.read_exact(&mut v).ok()?;
        Some(v)
    }

    fn call(&mut self, req: &Request) -> Option<Vec<u8>> {
        self.send(req);
        self.read_response()
    }

    /// Whether the server still answers on this connection.
    fn alive(&mut self) -> bool {
        self.call(&Request::DeviceCount).is_some()
    }

    /// A contiguous tensor of `ty` and shape `ne` at `offset` in this connection's buffer.
    fn t(&self, id: u64, ty: Type, ne: [u32; 4], offset: u64) -> WireTensor {
        let mut w = WireTensor {
            id,
            ty: ty as u32,
            buffer: self.handle,
            data: self.base + offset,
            ne,
            ..WireTensor::default()
        };
        // wrapping: some attacks give shapes whose strides overflow u32 on purpose
        w.nb[0] = ty.type_size() as u32;
        w.nb[1] = w.nb[0].wrapping_mul(ne[0]) / ty.blck_size() as u32;
        w.nb[2] = w.nb[1].wrapping_mul(ne[1]);
        w.nb[3] = w.nb[2].wrapping_mul(ne[2]);
        w.flags = ggml::tensor::flags::COMPUTE as i32;
        w
    }

    fn f32s(&mut self, offset: u64, vals: &[f32]) {
        let data: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
        let t = self.t(9999, Type::F32, [vals.len() as u32, 1, 1, 1], offset);
        self.send(&Request::SetTensor {
            tensor: t,
            cache: false,
            offset: 0,
            data,
        });
    }

    fn get(&mut self, offset: u64, n: u32) -> Vec<u8> {
        let t = self.t(9998, Type::I8, [n, 1, 1, 1], offset);
        self.call(&Request::GetTensor {
            tensor: t,
            offset: 0,
            size: u64::from(n),
        })
        .unwrap()
    }

    /// ADD of two f32[4] at 0 and 16 into 32: a good graph to break.
    fn add_graph(&self) -> GraphMsg {
        let a = self.t(1, Type::F32, [4, 1, 1, 1], 0);
        let b = self.t(2, Type::F32, [4, 1, 1, 1], 16);
        let mut c = self.t(3, Type::F32, [4, 1, 1, 1], 32);
        c.op = Op::Add as u32;
        c.src[0] = 1;
        c.src[1] = 2;
        GraphMsg {
            device: 0,
            nodes: vec![3],
            tensors: vec![a, b, c],
        }
    }
}

/// What an attack should meet.
#[derive(Debug, PartialEq)]
enum Expect {
    /// The connection is closed.
    Closed,
    /// The connection stays up (a harmless answer, checked by the case).
    Alive,
}

type Case = (&'static str, Expect, fn(&mut Raw));

/// GET_TENSOR of 16 bytes of an f32 [4] at 0, changed by `f`.
fn get_bad(r: &mut Raw, f: impl FnOnce(&mut WireTensor)) {
    let mut t = r.t(1, Type::F32, [4, 1, 1, 1], 0);
    f(&mut t);
    r.send(&Request::GetTensor {
        tensor: t,
        offset: 0,
        size: 16,
    });
}

fn graph(r: &mut Raw, f: impl FnOnce(&mut GraphMsg)) {
    let mut g = r.add_graph();
    f(&mut g);
    r.send(&Request::GraphCompute(g));
}

fn cases() -> Vec<Case> {
    use Expect::*;
    vec![
        ("tensor outside its buffer (SET_TENSOR)", Closed, |r| {
            let t = r.t(1, Type::F32, [64, 1, 1, 1], BUF - 16);
            r.send(&Request::SetTensor {
                tensor: t,
                cache: false,
                offset: 0,
                data: vec![7; 256],
            });
        }),
        (
            "tensor address before its buffer (GET_TENSOR)",
            Closed,
            |r| {
                let mut t = r.t(1, Type::F32, [4, 1, 1, 1], 0);
                t.data = r.base - 64;
                r.send(&Request::GetTensor {
                    tensor: t,
                    offset: 0,
                    size: 16,
                });
            },
        ),
        ("wrapping ne (u32::MAX in every dimension)", Closed, |r| {
            let mut t = r.t(1, Type::F32, [u32::MAX; 4], 0);
            t.nb = [4, u32::MAX, u32::MAX, u32::MAX];
            r.send(&Request::GetTensor {
                tensor: t,
                offset: 0,
                size: 16,
            });
        }),
        (
            "wrapping nb (a stride that walks far past the buffer)",
            Closed,
            |r| {
                let mut t = r.t(1, Type::F32, [4, 2, 1, 1], 0);
                t.nb[1] = u32::MAX;
                r.send(&Request::MemsetTensor {
                    tensor: t,
                    offset: 0,
                    size: 16,
                    value: 1,
                });
            },
        ),
        ("GET_TENSOR offset + size wrapping 2^64", Closed, |r| {
            let t = r.t(1, Type::F32, [4, 1, 1, 1], 0);
            r.send(&Request::GetTensor {
                tensor: t,
                offset: u64::MAX - 3,
                size: 8,
            });
        }),
        ("MEMSET_TENSOR past the tensor", Closed, |r| {
            let t = r.t(1, Type::F32, [4, 1, 1, 1], 0);
            r.send(&Request::MemsetTensor {
                tensor: t,
                offset: 8,
                size: 4096,
                value: 1,
            });
        }),
        (
            "COPY_TENSOR into a destination past the buffer",
            Closed,
            |r| {
                let src = r.t(1, Type::F32, [64, 1, 1, 1], 0);
                let dst = r.t(2, Type::F32, [64, 1, 1, 1], BUF - 64);
                r.send(&Request::CopyTensor { src, dst });
            },
        ),
        ("unknown buffer handle", Closed, |r| {
            get_bad(r, |t| {
                t.buffer = 0xdead_beef;
            })
        }),
        ("FREE_BUFFER of a handle never allocated", Closed, |r| {
            r.send(&Request::FreeBuffer {
                remote_ptr: r.handle + 77,
            });
        }),
        ("type id past the type count", Closed, |r| {
            get_bad(r, |t| {
                t.ty = 200;
            })
        }),
        ("a removed type (Q4_2, block size 0 in GGML)", Closed, |r| {
            get_bad(r, |t| {
                t.ty = 4;
            })
        }),
        (
            "quantized ne[0] not a whole number of blocks",
            Closed,
            |r| {
                let mut t = r.t(1, Type::Q4_0, [32, 1, 1, 1], 0);
                t.ne[0] = 3;
                r.send(&Request::GetTensor {
                    tensor: t,
                    offset: 0,
                    size: 2,
                });
            },
        ),
        ("unknown command 18 and 200", Closed, |r| {
            r.send_raw(&[18, 0, 0, 0, 0, 0, 0, 0, 0]);
            r.send_raw(&[200, 0, 0, 0, 0, 0, 0, 0, 0]);
        }),
        ("second HELLO", Closed, |r| {
            r.send(&Request::Hello { caps: [0; 24] });
        }),
        ("fixed-size command with a wrong length", Closed, |r| {
            r.send_raw(&[Cmd::GetAlignment as u8, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        }),
        ("a 2^63-byte message", Closed, |r| {
            let mut v = vec![Cmd::SetTensor as u8];
            v.extend_from_slice(&(1u64 << 63).to_le_bytes());
            r.send_raw(&v);
        }),
        ("a 2^63-byte GRAPH_COMPUTE", Closed, |r| {
            let mut v = vec![Cmd::GraphCompute as u8];
            v.extend_from_slice(&(1u64 << 63).to_le_bytes());
            r.send_raw(&v);
        }),
        ("GRAPH_COMPUTE counts larger than its bytes", Closed, |r| {
            let mut p = Request::GraphCompute(r.add_graph()).encode_payload();
            p[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
            let mut v = vec![Cmd::GraphCompute as u8];
            v.extend_from_slice(&(p.len() as u64).to_le_bytes());
            v.extend_from_slice(&p);
            r.send_raw(&v);
        }),
        ("GRAPH_COMPUTE with a null buffer", Closed, |r| {
            graph(r, |g| {
                g.tensors[0].buffer = 0;
                g.tensors[0].data = 0;
            })
        }),
        ("GRAPH_COMPUTE data address without a buffer", Closed, |r| {
            graph(r, |g| g.tensors[1].buffer = 0)
        }),
        ("op id past the op count (101 and 255)", Closed, |r| {
            graph(r, |g| g.tensors[2].op = 101);
            graph(r, |g| g.tensors[2].op = 255);
        }),
        (
            "CUSTOM op with a function pointer in op_params",
            Closed,
            |r| {
                graph(r, |g| {
                    g.tensors[2].op = Op::Custom as u32;
                    g.tensors[2].op_params[0] = 0x4141_4141;
                    g.tensors[2].op_params[1] = 0x4141_4141;
                })
            },
        ),
        ("MAP_CUSTOM1/2/3 ops", Closed, |r| {
            for op in [Op::MapCustom1, Op::MapCustom2, Op::MapCustom3] {
                graph(r, |g| g.tensors[2].op = op as u32);
            }
        }),
        ("wrong MUL_MAT destination shape", Closed, |r| {
            graph(r, |g| {
                let c = &mut g.tensors[2];
                c.op = Op::MulMat as u32;
                c.ne = [2, 1, 1, 1];
                c.nb = [4, 8, 8, 8];
            })
        }),
        ("ADD destination larger than its operands", Closed, |r| {
            graph(r, |g| {
                let c = &mut g.tensors[2];
                c.ne = [64, 1, 1, 1];
                c.nb = [4, 256, 256, 256];
            })
        }),
        ("negative ACC offset", Closed, |r| {
            graph(r, |g| {
                let c = &mut g.tensors[2];
                c.op = Op::Acc as u32;
                // nb1, nb2, nb3, offset, inplace
                c.op_params[..5].copy_from_slice(&[16, 16, 16, -4096, 0]);
            })
        }),
        ("ACC window with negative strides", Closed, |r| {
            graph(r, |g| {
                let c = &mut g.tensors[2];
                c.op = Op::Acc as u32;
                c.op_params[..5].copy_from_slice(&[-16, -16, -16, 0, 0]);
            })
        }),
        ("SET with an offset past its destination", Closed, |r| {
            graph(r, |g| {
                let c = &mut g.tensors[2];
                c.op = Op::Set as u32;
                c.op_params[..5].copy_from_slice(&[16, 16, 16, 1 << 20, 0]);
            })
        }),
        ("GET_ROWS with float indices", Closed, |r| {
            graph(r, |g| {
                let c = &mut g.tensors[2];
                c.op = Op::GetRows as u32;
                c.ne = [4, 4, 1, 1];
            })
        }),
        (
            "SET_ROWS / SSM_SCAN (index ops this server does not compute)",
            Closed,
            |r| {
                graph(r, |g| g.tensors[2].op = Op::SetRows as u32);
                graph(r, |g| g.tensors[2].op = Op::SsmScan as u32);
            },
        ),
        ("an operand id that was never sent", Closed, |r| {
            graph(r, |g| g.tensors[2].src[1] = 0x5555)
        }),
        ("a cycle: an operand sent after its user", Closed, |r| {
            graph(r, |g| {
                g.tensors[0].op = Op::Add as u32;
                g.tensors[0].src[0] = 3;
                g.tensors[0].src[1] = 2;
            })
        }),
        ("a node id that is not among the tensors", Closed, |r| {
            graph(r, |g| g.nodes = vec![0x7777])
        }),
        ("the same tensor id twice", Closed, |r| {
            graph(r, |g| g.tensors[1].id = 1)
        }),
        ("a view past the end of what it views", Closed, |r| {
            graph(r, |g| {
                let c = &mut g.tensors[2];
                c.op = Op::View as u32;
                c.src = [0; 10];
                c.src[0] = 1;
                c.view_src = 1;
                c.view_offs = 1 << 40;
            })
        }),
        ("GRAPH_RECOMPUTE with no graph", Closed, |r| {
            r.send(&Request::GraphRecompute { device: 0 });
        }),
        ("GRAPH_RECOMPUTE after its buffer was freed", Closed, |r| {
            let g = r.add_graph();
            r.send(&Request::GraphCompute(g));
            r.send(&Request::FreeBuffer {
                remote_ptr: r.handle,
            });
            r.send(&Request::GraphRecompute { device: 0 });
        }),
        ("device index out of range", Closed, |r| {
            r.send(&Request::GetAlignment { device: 9 });
        }),
        (
            "an allocation of 2^62 bytes is refused, not attempted",
            Alive,
            |r| {
                let v = r
                    .call(&Request::AllocBuffer {
                        device: 0,
                        size: 1 << 62,
                    })
                    .unwrap();
                assert_eq!(v, vec![0; 16], "remote_ptr 0: allocation failed");
            },
        ),
        (
            "GET_ROWS indices out of range fail the compute (closing the connection)",
            Closed,
            |r| {
                // a: f32 [4, 2] at 0 (rows 0 and 1); ids i32 [3] at 64; out f32 [4, 3] at 128.
                r.f32s(0, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
                let ids: Vec<u8> = [1i32, -5, 1 << 30]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect();
                let it = r.t(9997, Type::I32, [3, 1, 1, 1], 64);
                r.send(&Request::SetTensor {
                    tensor: it,
                    cache: false,
                    offset: 0,
                    data: ids,
                });
                let a = r.t(1, Type::F32, [4, 2, 1, 1], 0);
                let ids = r.t(2, Type::I32, [3, 1, 1, 1], 64);
                let mut c = r.t(3, Type::F32, [4, 3, 1, 1], 128);
                c.op = Op::GetRows as u32;
                c.src[0] = 1;
                c.src[1] = 2;
                // GRAPH_COMPUTE has no reply in protocol 7: a failed compute can only close
                // the connection. The kernel reads nothing outside `a` (the ops tests check
                // its output and neighbours).
                r.send(&Request::GraphCompute(GraphMsg {
                    device: 0,
                    nodes: vec![3],
                    tensors: vec![a, ids, c],
                }));
            },
        ),
        (
            "CONV_2D with a 1x1 kernel whose size-1 dimensions have 1 GiB strides computes \
             from the kernel's packed bytes",
            Alive,
            |r| {
                // kernel f32 [1, 1, 4, 1] at 0 (contiguous: only dimension 2 has more than one
                // element), input f32 [2, 2, 4, 1] at 64 holding 1..=16, out f32 [2, 2, 1, 1]
                // at 256. A kernel that stepped by nb[0] would read 1 GiB past the buffer.
                r.f32s(0, &[1.0, 2.0, 3.0, 4.0]);
                let input: Vec<f32> = (1..=16).map(|v| v as f32).collect();
                r.f32s(64, &input);
                let mut k = r.t(1, Type::F32, [1, 1, 4, 1], 0);
                k.nb = [1 << 30, 1 << 30, 4, 16];
                let b = r.t(2, Type::F32, [2, 2, 4, 1], 64);
                let mut c = r.t(3, Type::F32, [2, 2, 1, 1], 256);
                c.op = Op::Conv2d as u32;
                c.src[0] = 1;
                c.src[1] = 2;
                c.op_params[..6].copy_from_slice(&[1, 1, 0, 0, 1, 1]);
                r.send(&Request::GraphCompute(GraphMsg {
                    device: 0,
                    nodes: vec![3],
                    tensors: vec![k, b, c],
                }));
                let out: Vec<f32> = r
                    .get(256, 16)
                    .chunks(4)
                    .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                    .collect();
                // out[j] = sum over c of (c + 1) * (j + 4c + 1)
                assert_eq!(out, vec![90.0, 100.0, 110.0, 120.0]);
            },
        ),
    ]
}

#[test]
fn each_attack_is_refused_and_the_server_keeps_serving() {
    let cpu = backend::dev_by_type(DeviceType::Cpu).unwrap();
    let server = Server::start("127.0.0.1:0", None, 1, &[cpu]).unwrap();
    let ep = server.endpoint();
    let all = cases();
    assert!(all.len() >= 28, "{} cases", all.len());
    for (name, expect, attack) in all {
        let mut r = Raw::connect(&ep);
        attack(&mut r);
        let alive = r.alive();
        let got = if alive { Expect::Alive } else { Expect::Closed };
        assert_eq!(got, expect, "case {name:?}");
        // Another client is served as before.
        let mut other = Raw::connect(&ep);
        other.f32s(0, &[1.0, 2.0, 3.0, 4.0]);
        other.f32s(16, &[10.0, 20.0, 30.0, 40.0]);
        let g = other.add_graph();
        other.send(&Request::GraphCompute(g));
        let sum: Vec<f32> = other
            .get(32, 16)
            .chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(sum, vec![11.0, 22.0, 33.0, 44.0], "after case {name:?}");
    }
    // And a full client through the library.
    let reg = ggml_rpc::add_server(&ep).unwrap();
    let stream = reg.dev_get(0).unwrap().init(None).unwrap();
    assert_close(&Mixed::run_on(&stream, 42), &cpu_reference(42), 1e-5);
}

#[test]
fn buffers_of_one_connection_are_invisible_to_another() {
    let cpu = backend::dev_by_type(DeviceType::Cpu).unwrap();
    let server = Server::start("127.0.0.1:0", None, 1, &[cpu]).unwrap();
    let mut a = Raw::connect(&server.endpoint());
    a.f32s(0, &[1.0, 2.0, 3.0, 4.0]);
    let mut b = Raw::connect(&server.endpoint());
    // b's own buffer has a handle of its own; a's handle means nothing on b's connection
    // unless b allocated the same number, whose bytes are b's.
    assert_eq!(a.get(0, 16)[..4], 1.0f32.to_le_bytes());
    let mut t = b.t(1, Type::F32, [4, 1, 1, 1], 0);
    t.buffer = a.handle + 100;
    b.send(&Request::GetTensor {
        tensor: t,
        offset: 0,
        size: 16,
    });
    assert!(!b.alive(), "a foreign handle closes the connection");
    assert!(a.alive());
}
