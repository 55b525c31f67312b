//! Every [`Simd`] implementation this CPU runs against [`Scalar`], lane by lane, bit for bit.

use super::*;
use crate::vec_dot::fma_f64::tests::next;
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

/// The lanes of `v`.
fn lanes<S: Simd>(s: S, v: S::F32) -> Vec<f32> {
    let mut out = vec![0.0; S::LANES];
    s.store(&mut out, v);
    out
}

fn same(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// Operands: special values, values around f16's rounding points and range, random bits.
fn operands(count: usize, seed: u64) -> Vec<f32> {
    let mut v = vec![
        0.0,
        -0.0,
        1.0,
        -1.5,
        f32::MIN_POSITIVE,
        -1.0e-40,
        65504.0,
        65519.99,
        65520.0,
        -65536.0,
        5.960_464_5e-8,
        2.980_232_2e-8,
        f32::MAX,
        f32::MIN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
    ];
    let mut state = seed;
    while v.len() < count {
        let bits = next(&mut state);
        v.push(if bits.is_multiple_of(3) {
            f32::from_bits(bits as u32)
        } else {
            // Moderate magnitudes, where f16 rounding and FMA are interesting.
            ((bits >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 2f32.powi((bits % 40) as i32 - 20)
        });
    }
    v
}

/// Runs `op` on `S` and `reference` on [`Scalar`] over `LANES`-long chunks of the operand
/// columns `args`, and compares lane by lane.
fn check_op<S: Simd>(
    s: S,
    name: &str,
    args: &[Vec<f32>],
    op: impl Fn(S, &[S::F32]) -> S::F32,
    reference: impl Fn(Scalar, &[f32]) -> f32,
) {
    let n = args[0].len() / S::LANES * S::LANES;
    for i in (0..n).step_by(S::LANES) {
        let vs: Vec<S::F32> = args.iter().map(|a| s.load(&a[i..])).collect();
        let got = lanes(s, op(s, &vs));
        for (l, g) in got.iter().enumerate() {
            let xs: Vec<f32> = args.iter().map(|a| a[i + l]).collect();
            let want = reference(Scalar, &xs);
            assert!(same(*g, want), "{name}{xs:?}: {want:e}, got {g:e}");
        }
    }
}

/// Every primitive of `s` equals [`Scalar`]'s.
fn check_against_scalar<S: Simd>(s: S) {
    let n = 4096;
    let (a, b, c) = (operands(n, 1), operands(n, 2), operands(n, 3));
    let one = [a.clone()];
    let two = [a.clone(), b.clone()];
    let three = [a, b, c];
    check_op(
        s,
        "add",
        &two,
        |s, v| s.add(v[0], v[1]),
        |r, x| r.add(x[0], x[1]),
    );
    check_op(
        s,
        "sub",
        &two,
        |s, v| s.sub(v[0], v[1]),
        |r, x| r.sub(x[0], x[1]),
    );
    check_op(
        s,
        "mul",
        &two,
        |s, v| s.mul(v[0], v[1]),
        |r, x| r.mul(x[0], x[1]),
    );
    check_op(
        s,
        "div",
        &two,
        |s, v| s.div(v[0], v[1]),
        |r, x| r.div(x[0], x[1]),
    );
    check_op(s, "neg", &one, |s, v| s.neg(v[0]), |r, x| r.neg(x[0]));
    check_op(s, "abs", &one, |s, v| s.abs(v[0]), |r, x| r.abs(x[0]));
    check_op(
        s,
        "round_f16",
        &one,
        |s, v| s.round_f16(v[0]),
        |r, x| r.round_f16(x[0]),
    );
    check_op(
        s,
        "mul_add",
        &three,
        |s, v| s.mul_add(v[0], v[1], v[2]),
        |r, x| r.mul_add(x[0], x[1], x[2]),
    );
    check_op(
        s,
        "neg_mul_add",
        &three,
        |s, v| s.neg_mul_add(v[0], v[1], v[2]),
        |r, x| r.neg_mul_add(x[0], x[1], x[2]),
    );
    // Comparisons through select, with distinguishable branches.
    check_op(
        s,
        "select(gt)",
        &three,
        |s, v| s.select(s.gt(v[0], v[1]), v[2], s.splat(7.0)),
        |r, x| r.select(r.gt(x[0], x[1]), x[2], 7.0),
    );
    check_op(
        s,
        "select(le)",
        &three,
        |s, v| s.select(s.le(v[0], v[1]), v[2], s.splat(7.0)),
        |r, x| r.select(r.le(x[0], x[1]), x[2], 7.0),
    );
    // min: bit-exact where neither operand is NaN, one of the operands where one is.
    let min_args: Vec<Vec<f32>> = two
        .iter()
        .map(|a| {
            a.iter()
                .map(|&x| if x.is_nan() { 1.5 } else { x })
                .collect()
        })
        .collect();
    check_op(
        s,
        "min",
        &min_args,
        |s, v| s.min(v[0], v[1]),
        |r, x| r.min(x[0], x[1]),
    );
    let nan = [f32::NAN, 2.0, f32::NAN, -3.0].repeat(4);
    let other = [1.0, f32::NAN, f32::NAN, 7.0].repeat(4);
    let got = lanes(s, s.min(s.load(&nan), s.load(&other)));
    for (i, g) in got.iter().enumerate() {
        let (a, b) = (nan[i], other[i]);
        assert!(
            g.to_bits() == a.to_bits() || g.to_bits() == b.to_bits(),
            "min({a}, {b}): {g}"
        );
    }
    check_op(
        s,
        "select(or_mask(gt, le))",
        &three,
        |s, v| {
            let m = s.or_mask(s.gt(v[0], v[1]), s.le(v[2], s.splat(0.0)));
            s.select(m, v[2], s.splat(7.0))
        },
        |r, x| r.select(r.or_mask(r.gt(x[0], x[1]), r.le(x[2], 0.0)), x[2], 7.0),
    );
    // Low mantissa bits: random ones, and values with 0 to 13 trailing zero bits.
    let trailing: Vec<f32> = operands(n, 4)
        .iter()
        .enumerate()
        .map(|(i, x)| f32::from_bits(x.to_bits() & !((1u32 << (i % 14)) - 1)))
        .collect();
    check_op(
        s,
        "select(low12_mantissa_zero)",
        std::slice::from_ref(&trailing),
        |s, v| s.select(s.low12_mantissa_zero(v[0]), s.splat(1.0), s.splat(2.0)),
        |r, x| r.select(r.low12_mantissa_zero(x[0]), 1.0, 2.0),
    );
    // round_to_odd on TwoSum pairs (its use) and on arbitrary ones (the lanes agree anyway).
    let (sums, errors): (Vec<f32>, Vec<f32>) = trailing
        .iter()
        .zip(operands(n, 5))
        .map(|(&x, y)| {
            let s = x + y;
            let bb = s - x;
            (s, (x - (s - bb)) + (y - bb))
        })
        .unzip();
    for args in [[sums, errors], [operands(n, 6), operands(n, 7)]] {
        check_op(
            s,
            "round_to_odd",
            &args,
            |s, v| s.round_to_odd(v[0], v[1]),
            |r, x| r.round_to_odd(x[0], x[1]),
        );
    }
    // sum_halves_f16 of f16-exact lanes against the halving order in scalar f16 arithmetic.
    let f16_lanes: Vec<f32> = operands(n, 8)
        .iter()
        .map(|x| f16::from_f32(*x).to_f32())
        .collect();
    for chunk in f16_lanes.chunks_exact(S::LANES) {
        let mut want = chunk.to_vec();
        let mut w = S::LANES / 2;
        while w >= 1 {
            for i in 0..w {
                want[i] = Scalar.round_f16(want[i] + want[i + w]);
            }
            w /= 2;
        }
        let got = s.sum_halves_f16(s.load(chunk));
        assert!(
            same(got, want[0]),
            "sum_halves_f16{chunk:?}: {}, got {got}",
            want[0]
        );
    }
    // Wide sums of values whose f64 sum is exact in any order (multiples of 2^-20 below 2^20).
    let small: Vec<f32> = operands(n, 9)
        .iter()
        .map(|x| (x.to_bits() % (1 << 21)) as f32 * 2f32.powi(-20) - 1.0)
        .collect();
    let mut acc = s.wide_zero();
    for chunk in small.chunks_exact(S::LANES) {
        acc = s.wide_add(acc, s.load(chunk));
    }
    let want: f64 = small[..small.len() / S::LANES * S::LANES]
        .iter()
        .map(|&x| x as f64)
        .sum();
    assert_eq!(s.wide_total(acc), want, "wide sums");
    // Lane minimum and lane sum (of multiples of 2^-16 below 1: their f32 sums of 16 lanes are
    // exact in any order).
    let coarse: Vec<f32> = small
        .iter()
        .map(|x| (x * 65536.0).round() / 65536.0)
        .collect();
    for chunk in coarse.chunks_exact(S::LANES) {
        let v = s.load(chunk);
        let min = chunk.iter().copied().fold(f32::INFINITY, f32::min);
        assert_eq!(s.lane_min(v), min, "lane_min{chunk:?}");
        let sum: f64 = chunk.iter().map(|&x| x as f64).sum();
        assert_eq!(s.lane_sum(v) as f64, sum, "lane_sum{chunk:?}");
    }
    let x32 = s.x32_splat(3.5);
    assert_eq!(x32.as_ref().len() * S::LANES, 32);
    for v in x32.as_ref() {
        assert_eq!(lanes(s, *v)[..S::LANES], [3.5; 16][..S::LANES]);
    }
    // scale_by_pow2 over its whole domain, with factors that make subnormal results.
    let ns: Vec<f32> = (-192..=192).flat_map(|n| [n as f32; 8]).collect();
    let js: Vec<f32> = (0..ns.len()).map(|i| 0.7 + (i % 8) as f32 * 0.1).collect();
    check_op(
        s,
        "scale_by_pow2",
        &[js, ns],
        |s, v| s.scale_by_pow2(v[0], v[1]),
        |r, x| r.scale_by_pow2(x[0], x[1]),
    );
    // Every f16 widens exactly, and f32s on and next to every f16 round like `half`.
    let halves: Vec<f16> = (0..=u16::MAX).map(f16::from_bits).collect();
    for (i, h) in halves.chunks_exact(S::LANES).enumerate() {
        let got = lanes(s, s.load_f16(h));
        for (l, g) in got.iter().enumerate() {
            // Bit for bit, NaNs included (quieted, payload kept, as `half` widens them).
            assert_eq!(
                g.to_bits(),
                h[l].to_f32().to_bits(),
                "load_f16 #{}",
                i * S::LANES + l
            );
        }
    }
    // `widen_f16`: the same bits, from several starting points and lengths (runs that hold
    // infinities and NaNs among finite values included).
    for (start, len) in [
        (0, halves.len()),
        (3, 1000),
        (31740, 60),
        (64508, 28),
        (5, 3),
    ] {
        let src = &halves[start..start + len];
        let mut dst = vec![0.5f32; len];
        let done = s.widen_f16(src, &mut dst);
        assert_eq!(done, len / S::LANES * S::LANES, "widen_f16 count");
        for (i, d) in dst.iter().enumerate() {
            let want = if i < done {
                src[i].to_f32().to_bits()
            } else {
                0.5f32.to_bits()
            };
            assert_eq!(d.to_bits(), want, "widen_f16 #{}", start + i);
        }
    }
    let near: Vec<f32> = halves
        .iter()
        .flat_map(|h| {
            let b = h.to_f32().to_bits();
            [
                b,
                b.wrapping_add(1),
                b.wrapping_sub(1),
                b ^ 0x1000,
                (b ^ 0x1000).wrapping_add(1),
                (b ^ 0x1000).wrapping_sub(1),
                b | 0xfff,
            ]
            .map(f32::from_bits)
        })
        .collect();
    check_op(
        s,
        "round_f16",
        std::slice::from_ref(&near),
        |s, v| s.round_f16(v[0]),
        |r, x| r.round_f16(x[0]),
    );
    // `round_f16_n` on runs of neighbouring values (one binade: its shared fast path, if any)
    // and on the same values shuffled (runs that mix ranges), against `round_f16` of each.
    let mut state = 7;
    let mut shuffled = near.clone();
    for i in (1..shuffled.len()).rev() {
        shuffled.swap(i, next(&mut state) as usize % (i + 1));
    }
    for values in [&near, &shuffled, &operands(n, 4)] {
        for run in values.chunks_exact(4 * S::LANES) {
            let v = [0, 1, 2, 3].map(|i| s.load(&run[i * S::LANES..]));
            let got = s.round_f16_n(v);
            for (i, g) in got.into_iter().enumerate() {
                for (l, g) in lanes(s, g).into_iter().enumerate() {
                    let x = run[i * S::LANES + l];
                    let want = Scalar.round_f16(x);
                    assert!(same(g, want), "round_f16_n {x:e}: {want:e}, got {g:e}");
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[test]
fn avx2_matches_scalar() {
    match Avx2::new() {
        Some(s) => check_against_scalar(s),
        None => eprintln!("no AVX2 + FMA + F16C here: nothing to check"),
    }
}

#[cfg(target_arch = "x86_64")]
#[test]
fn avx512_matches_scalar() {
    match Avx512::new() {
        Some(s) => check_against_scalar(s),
        None => eprintln!("no AVX-512 here: nothing to check"),
    }
}

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
#[test]
fn simd128_matches_scalar() {
    check_against_scalar(Simd128);
}
