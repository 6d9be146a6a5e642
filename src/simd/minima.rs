//! The inner loop of a similarity sketch: for one feature `x`, every
//! function's running minimum of `(x ^ key) · multiplier`. The AVX-512
//! build multiplies eight 64-bit lanes at a time (VPMULLQ); the baseline
//! has no 64-bit vector multiply.

/// `mins[i] = min(mins[i], (x ^ keys[i]) · muls[i])` (wrapping), for
/// every `i` (the slices have equal lengths).
#[inline]
pub(crate) fn fold(mins: &mut [u64], keys: &[u64], muls: &[u64], x: u64) {
    #[cfg(target_arch = "x86_64")]
    if super::cpu::wide_multiply() {
        // SAFETY: the processor has AVX-512F and AVX-512DQ (checked at
        // run time by `wide_multiply`).
        unsafe { fold_avx512(mins, keys, muls, x) };
        return;
    }
    fold_scalar(mins, keys, muls, x);
}

/// The reference loop.
pub(crate) fn fold_scalar(mins: &mut [u64], keys: &[u64], muls: &[u64], x: u64) {
    for ((min, &key), &mul) in mins.iter_mut().zip(keys).zip(muls) {
        *min = (*min).min((x ^ key).wrapping_mul(mul));
    }
}

/// The reference loop compiled for AVX-512 (the compiler turns it into
/// eight-lane XOR, VPMULLQ and VPMINUQ).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn fold_avx512(mins: &mut [u64], keys: &[u64], muls: &[u64], x: u64) {
    for ((min, &key), &mul) in mins.iter_mut().zip(keys).zip(muls) {
        *min = (*min).min((x ^ key).wrapping_mul(mul));
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn both_loops_agree() {
        let mut rng = crate::test_rng::TestRng::new(5);
        let n = 496;
        let keys: Vec<u64> = (0..n).map(|_| rng.next_u64()).collect();
        let muls: Vec<u64> = (0..n).map(|_| rng.next_u64() | 1).collect();
        let (mut a, mut b) = (vec![u64::MAX; n], vec![u64::MAX; n]);
        for _ in 0..100 {
            let x = rng.next_u64();
            super::fold_scalar(&mut a, &keys, &muls, x);
            super::fold(&mut b, &keys, &muls, x);
        }
        assert_eq!(a, b);
        assert!(a.iter().all(|&m| m < u64::MAX));
    }
}
