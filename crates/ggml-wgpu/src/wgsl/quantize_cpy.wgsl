// CPY into a quantized type (before quantize.wgsl): block t of the contiguous result.

const BYTES: u32 = {BYTES}u;
const NONE: u32 = 0xffffffffu;

fn block_at(t: u32) -> u32 {
    if (t >= xu(3u)) {
        return NONE;
    }
    return p.d.off + t * BYTES;
}
