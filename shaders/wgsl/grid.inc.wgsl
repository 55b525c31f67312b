// Dispatches wider than 65535 workgroups are folded into x and y; this undoes the fold.
fn linear_group(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.x + wid.y * nwg.x;
}
