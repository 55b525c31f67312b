//! Every instruction set's attention arithmetic against [`Scalar`]'s, bit for bit (the scalar
//! code is checked against exact arithmetic in `f16_arith`'s tests and against llama.cpp by the
//! fidelity tests).

use super::f16_arith::tests::{widen, Rng};
use super::f16_arith::{self, add_f16, fma_f16, round_f16};
use super::f64_sum::{exact_dot_f64, head_plus_leftovers};
use half::f16;
use tessera_quant::isa::{Scalar, Simd};
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

fn same(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// `f` on vectors of `s` loaded from the columns `args`, lane by lane against `f` on `Scalar`.
fn lanes_match<S: Simd>(
    s: S,
    name: &str,
    args: [&[f32]; 3],
    f: impl Fn([S::F32; 3]) -> S::F32,
    g: impl Fn([f32; 3]) -> f32,
) {
    let mut got = vec![0.0; S::LANES];
    s.store(&mut got, f(args.map(|a| s.load(a))));
    for (l, got) in got.iter().enumerate() {
        let x = args.map(|a| a[l]);
        let want = g(x);
        assert!(same(*got, want), "{name} {x:?}: {want} vs {got}");
    }
}

fn fma_and_add_lanes<S: Simd>(s: S) {
    let mut rng = Rng(0xdead_beef_1234_5678);
    for case in 0..40_000 {
        let v: [Vec<f32>; 3] =
            std::array::from_fn(|_| (0..S::LANES).map(|_| rng.f16().to_f32()).collect());
        let a = [&v[0][..], &v[1][..], &v[2][..]];
        lanes_match(
            s,
            "fma",
            a,
            |x| fma_f16(s, x[0], x[1], x[2]),
            |x| fma_f16(Scalar, x[0], x[1], x[2]),
        );
        // Same binade, opposite sign or not: the sums that cancel or need 12 bits.
        let b: Vec<f32> = v[0]
            .iter()
            .map(|&x| {
                let other = if case % 2 == 0 {
                    rng.f16().to_bits()
                } else {
                    rng.f16().to_bits() & 0x83ff | f16::from_f32(x).to_bits() & 0x7c00
                };
                f16::from_bits(other).to_f32()
            })
            .collect();
        lanes_match(
            s,
            "add",
            [a[0], &b, a[2]],
            |x| add_f16(s, x[0], x[1]),
            |x| add_f16(Scalar, x[0], x[1]),
        );
    }
    // The fast path's blind spot: `a*b + c` whose f32 rounding lands exactly on an f16
    // midpoint. (1 + 2^-10)(1 - 2^-10) + 2050 = 2051 - 2^-20 rounds in f32 to 2051, the midpoint
    // of 2050 and 2052; ties-to-even of that would give 2052, the exact sum rounds to 2050.
    let (a, b) = (1.0 + 2f32.powi(-10), 1.0 - 2f32.powi(-10));
    for (c, want) in [
        (2050.0f32, 2050.0f32),
        (-2050.0, -2050.0),
        (2048.0, 2048.0),
        (2047.0, 2048.0),
    ] {
        let mut got = vec![0.0; S::LANES];
        s.store(&mut got, fma_f16(s, s.splat(a), s.splat(b), s.splat(c)));
        assert_eq!(got, vec![want; S::LANES], "c = {c}");
    }
}

fn steps<S: Simd>(s: S) {
    // The midpoint case above inside a dot product (key 2, lane 37 of step 2).
    let mut keys = vec![vec![0.0f32; 256]; 4];
    let mut q = vec![0.0f32; 256];
    (keys[2][37], q[37]) = (2050.0, 1.0);
    (keys[2][128 + 37], q[128 + 37]) = (1.0 + 2f32.powi(-10), 1.0 - 2f32.powi(-10));
    keys[1][5] = 3.0; // q[5] = 0: the other keys stay at zero
    let got = f16_arith::dot_steps_x4(s, std::array::from_fn(|b| &keys[b][..]), &q);
    assert_eq!(got, [0.0, 0.0, 2050.0, 0.0]);

    let mut rng = Rng(42);
    for case in 0..600 {
        let n = 128 * (1 + case % 3);
        // Moderate magnitudes (as attention sees) with some tiny and some random values.
        let mut gen = |_| {
            let x = rng.f16().to_f32();
            round_f16(if case % 2 == 0 { x.clamp(-4.0, 4.0) } else { x })
        };
        let keys: Vec<Vec<f32>> = (0..4).map(|_| (0..n).map(&mut gen).collect()).collect();
        let q: Vec<f32> = (0..n).map(&mut gen).collect();
        let got = f16_arith::dot_steps_x4(s, std::array::from_fn(|b| &keys[b][..]), &q);
        for (b, k) in keys.iter().enumerate() {
            let want = f16_arith::dot_steps(k, &q);
            assert!(
                same(got[b], want),
                "dot case {case} key {b}: {} vs {want}",
                got[b]
            );
        }
        // Factors as the softmax gives them, 1 (each new running maximum) and 0.
        let mut factor = || match rng.next() % 5 {
            3 => 1.0,
            4 => 0.0,
            _ => (rng.next() % 1000) as f32 / 997.0,
        };
        let factors = [factor(), factor(), factor()];
        let mut want: Vec<Vec<f32>> = keys[1..].to_vec();
        let mut got = want.clone();
        for (w, &f) in want.iter_mut().zip(&factors) {
            f16_arith::mad_steps(Scalar, [&mut w[..]], &q, [f]);
        }
        let [g0, g1, g2] = &mut got[..] else {
            unreachable!()
        };
        f16_arith::mad_steps(s, [&mut g0[..], &mut g1[..], &mut g2[..]], &q, factors);
        assert_eq!(want, got, "3-row mad case {case}, factors {factors:?}");
        // The tail loops, on lengths that are not whole vectors.
        let len = n - case % 7;
        let (mut a, mut b) = (keys[0][..len].to_vec(), keys[0][..len].to_vec());
        f16_arith::mad_tail(Scalar, &mut a, &q, factors[0]);
        f16_arith::mad_tail(s, &mut b, &q, factors[0]);
        assert_eq!(a, b, "mad tail case {case}");
        f16_arith::scale(Scalar, &mut a, factors[1]);
        f16_arith::scale(s, &mut b, factors[1]);
        assert_eq!(a, b, "scale case {case}");
    }
}

fn exact_f64_sums<S: Simd>(s: S) {
    // Random f16 bit patterns cover tiny, subnormal, huge, infinite and NaN values; the scaled
    // normals are what attention sees. Either the fast path declines or it returns the
    // sequential sum's bits.
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut taken, mut declined) = ([0; 3], [0; 3]);
    for case in 0..20_000 {
        let n = [16, 64, 96, 112][case % 4];
        let mut gen = |_| {
            let r = rng.next();
            match case % 3 {
                0 => f16::from_bits(r as u16),
                1 => f16::from_f32(((r >> 11) as f64 / (1u64 << 53) as f64 * 8.0 - 4.0) as f32),
                // Mostly ordinary values with an occasional tiny one.
                _ if r.is_multiple_of(50) => f16::from_bits((r >> 16) as u16 & 0x83ff),
                _ => f16::from_f32(((r >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) as f32),
            }
        };
        let k = widen(&(0..n).map(&mut gen).collect::<Vec<_>>());
        let q = widen(&(0..n).map(&mut gen).collect::<Vec<_>>());
        let want = head_plus_leftovers(0.0, &k, &q);
        match exact_dot_f64(s, &k, &q) {
            Some(got) => {
                taken[case % 3] += 1;
                assert!(same(got, want), "case {case}: {got} vs {want}");
            }
            None => declined[case % 3] += 1,
        }
    }
    // The check must let ordinary rows through (all but those with an f16 subnormal among
    // their values, about 0.2 % here), and must decline hostile ones (random bits: infinities,
    // NaNs, magnitudes from 2^-24 to 2^15 in one row).
    assert!(
        declined[1] * 200 < taken[1] && declined[0] > 100,
        "taken {taken:?}, declined {declined:?} (random bits, ordinary, with tiny values)"
    );
    // A row whose sequential sum rounds: 2^30 + 2^-28 is 2^30 in f64, so the sequential sum
    // ends at 0 while summing the lanes apart would give 2^-28.
    let mut k = vec![0.0f32; 16];
    let mut q = vec![0.0f32; 16];
    (k[0], q[0]) = (32768.0, 32768.0);
    (k[1], q[1]) = (2f32.powi(-14), 2f32.powi(-14));
    (k[4], q[4]) = (-32768.0, 32768.0);
    assert_eq!(head_plus_leftovers(0.0, &k, &q), 0.0);
    assert_eq!(exact_dot_f64(s, &k, &q), None);
    // Just past the bound: products 64, 2^-48 (two f16 subnormals: G = 2^-48) and -64 in one
    // lane (index 0 and 8), the tiny one in the next. In order, 64 + 2^-48 rounds to 64 and
    // the sum ends at 0; by lanes it is 2^-48. Σ|k|·max|q| = 128 is above 2^51·G = 8, so the
    // check must decline (a bound 2^5 times looser would not).
    let mut k = vec![0.0f32; 16];
    let mut q = vec![0.0f32; 16];
    (k[0], q[0]) = (8.0, 8.0);
    (k[1], q[1]) = (2f32.powi(-24), 2f32.powi(-24));
    (k[8], q[8]) = (-8.0, 8.0);
    assert_eq!(head_plus_leftovers(0.0, &k, &q), 0.0);
    assert_eq!(exact_dot_f64(s, &k, &q), None);
    // One non-finite product among zeros is not a zero sum.
    let mut k = vec![0.0f32; 16];
    let mut q = vec![0.0f32; 16];
    (k[3], q[3]) = (f32::INFINITY, 1.0);
    assert_eq!(exact_dot_f64(s, &k, &q), None);
    q[3] = 0.0;
    assert_eq!(exact_dot_f64(s, &k, &q), None);
    k[3] = 0.0;
    assert_eq!(exact_dot_f64(s, &k, &q), Some(0.0));
}

fn check_kernels<S: Simd>(s: S) {
    fma_and_add_lanes(s);
    steps(s);
    exact_f64_sums(s);
}

#[test]
fn scalar_kernels_agree_with_their_one_lane_selves() {
    // The scalar reference through the same generic code (and its own tail loops).
    check_kernels(Scalar);
}

#[cfg(target_arch = "x86_64")]
#[test]
fn avx2_kernels_match_scalar() {
    match tessera_quant::isa::Avx2::new() {
        Some(s) => check_kernels(s),
        None => eprintln!("no AVX2 + FMA + F16C here: nothing to check"),
    }
}

#[cfg(target_arch = "x86_64")]
#[test]
fn avx512_kernels_match_scalar() {
    match tessera_quant::isa::Avx512::new() {
        Some(s) => check_kernels(s),
        None => eprintln!("no AVX-512 here: nothing to check"),
    }
}

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
#[test]
fn simd128_kernels_match_scalar() {
    check_kernels(tessera_quant::isa::Simd128);
}
